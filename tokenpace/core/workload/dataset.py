"""A prompt dataset as a workload: each entry's turns, in a seeded order. Files are read by
adapters.datasets; this takes the entries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem
from tokenpace.core.workload.lengths import LengthDist
from tokenpace.core.workload.prompts import PromptMaker


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    """One item of a dataset: user turns (a plain prompt has one), the replies recorded with them
    (ShareGPT), the expected output length when the file gives one, or a chat to send as it is."""

    turns: tuple[str, ...] = ()
    replies: tuple[str, ...] = ()
    output_len: int | None = None
    messages: tuple[dict[str, str], ...] | None = None
    line: int = 0


def _order(n: int, rng: np.random.Generator) -> Iterator[int]:
    """Every index once in a seeded order, then again in a new order, endlessly."""
    while True:
        yield from (int(i) for i in rng.permutation(n))


@dataclass
class DatasetWorkload:
    entries: Sequence[DatasetEntry]
    output_len: LengthDist  # for entries that give no output length
    seed: int = 0
    maker: PromptMaker = field(default_factory=PromptMaker)
    source: dict[str, Any] = field(default_factory=dict)

    def fallback(self, rng: np.random.Generator) -> int:
        return int(self.output_len.sample(rng, 1)[0])

    def output_for(self, entry: DatasetEntry, rng: np.random.Generator) -> int:
        if entry.output_len:
            return entry.output_len
        if entry.replies and entry.replies[0].strip():
            return max(1, self.maker.counter.count(entry.replies[0]))
        return self.fallback(rng)

    @property
    def multi_turn(self) -> bool:
        """Some entries are conversations of several user turns (ShareGPT)."""
        return any(len(e.turns) > 1 for e in self.entries)

    def conversations(self, turns: int) -> Iterator[list[WorkItem]]:
        """Each entry's first ``turns`` user turns, with the recorded replies' lengths."""
        rng = np.random.default_rng(self.seed)
        count = self.maker.counter.count
        for i in _order(len(self.entries), rng):
            e = self.entries[i]
            group = []
            for k, text in enumerate(e.turns[:turns]):
                reply = e.replies[k] if k < len(e.replies) else ""
                out = count(reply) if reply.strip() else e.output_len or self.fallback(rng)
                group.append(WorkItem(k, text, count(text), max(1, out)))
            yield group

    def items(self) -> Iterator[WorkItem]:
        rng = np.random.default_rng(self.seed)
        count = self.maker.counter.count
        for index, i in enumerate(_order(len(self.entries), rng)):
            e = self.entries[i]
            out = self.output_for(e, rng)
            if e.messages is not None:
                text = " ".join(m.get("content") or "" for m in e.messages)
                yield WorkItem(index, text, count(text), out, messages=[dict(m) for m in e.messages])
            else:
                yield WorkItem(index, e.turns[0], count(e.turns[0]), out)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "dataset",
            **self.source,
            "entries": len(self.entries),
            "input_len": {"spec": f"dataset ({len(self.entries)} entries)"},
            "output_len": {
                "spec": f"from dataset, else {self.output_len.text}",
                "fallback": self.output_len.describe(),
            },
            "seed": self.seed,
            "tokenizer": self.maker.describe(),
        }
