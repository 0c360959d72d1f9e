"""Shared prefixes: every request starts with one of N shared K-token prefixes, then its own part.

The first request of the workload to use a prefix is *cold* (the server cannot have it cached,
unless an earlier run left it there); later ones are *warm*. Pure and seeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem, Workload
from tokenpace.core.workload.prompts import PromptMaker


@dataclass
class SharedPrefixes:
    inner: Workload
    prefix_len: int
    prefixes: int
    maker: PromptMaker
    seed: int = 0
    every: int = 1  # only every n-th request (a session's first turn) gets a prefix

    def texts(self) -> list[tuple[str, int]]:
        """The prefixes and their token counts (the same for a seed, in every process)."""
        rng = np.random.default_rng([self.seed, 104729])
        return [self.maker.make(self.prefix_len, rng) for _ in range(self.prefixes)]

    def _apply(self, item: WorkItem, texts: list[tuple[str, int]], pid: int, used: set[int]) -> WorkItem:
        text, n = texts[pid]
        item.prompt = f"{text} {item.prompt}"
        item.input_tokens += n
        if item.messages:
            first = item.messages[0]
            item.messages[0] = {**first, "content": f"{text} {first.get('content') or ''}"}
        item.prefix_id = pid
        item.prefix_cold = pid not in used
        used.add(pid)
        return item

    def items(self) -> Iterator[WorkItem]:
        texts = self.texts()
        rng = np.random.default_rng([self.seed, 15485863])
        used: set[int] = set()
        for item in self.inner.items():
            if item.index % self.every:
                yield item
                continue
            yield self._apply(item, texts, int(rng.integers(0, self.prefixes)), used)

    @property
    def multi_turn(self) -> bool:
        return bool(getattr(self.inner, "multi_turn", False))

    def conversations(self, turns: int) -> Iterator[list[WorkItem]]:
        """The inner dataset's conversations, each starting with a shared prefix."""
        texts = self.texts()
        rng = np.random.default_rng([self.seed, 15485863])
        used: set[int] = set()
        for group in self.inner.conversations(turns):  # type: ignore[attr-defined]
            group[0] = self._apply(group[0], texts, int(rng.integers(0, self.prefixes)), used)
            yield group

    def describe(self) -> dict[str, Any]:
        out = dict(self.inner.describe())
        out["shared_prefix"] = {
            "prefix_len": self.prefix_len,
            "prefixes": self.prefixes,
            "placement": "start of the first message, before the request's own text",
            "cold": "first request of the run (warm-up included) to use a prefix",
        }
        spec = out.get("input_len", {}).get("spec", "")
        out["input_len"] = {**out.get("input_len", {}), "spec": f"{self.prefix_len} shared + {spec}"}
        return out
