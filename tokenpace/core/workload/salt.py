"""The run's prompt salt: a few tokens at the start of every prompt, the same within a run and new
for each run, so that an engine's prefix cache cannot carry one run's prompts into the next (two runs
with the same seed would otherwise send identical prompts and the second would be measured warm).
Prefixes shared within a run stay shared: the salt comes before them. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem, Workload, stable_seed
from tokenpace.core.workload.prompts import PromptMaker

SALT_TOKENS = 4  # ~1e11 word orders from the built-in vocabulary; under one KV block of any engine
AUTO, NONE = "auto", "none"


def make_salt(key: str, maker: PromptMaker, tokens: int = SALT_TOKENS) -> tuple[str, int]:
    """The salt for ``key`` (the run id for ``auto``): words of the maker's vocabulary, and their
    token count."""
    return maker.make(tokens, np.random.default_rng(stable_seed("prompt-salt", key)))


@dataclass
class SaltedPrompts:
    """Every item's prompt (and a chat's first message) starts with ``salt``; its tokens are counted
    in the item's input tokens, so asked and server-counted prompt lengths still agree."""

    inner: Workload
    salt: str
    salt_tokens: int

    def __getattr__(self, name: str) -> Any:  # offsets(), multi_turn, ... of the wrapped workload
        return getattr(self.inner, name)

    def items(self) -> Iterator[WorkItem]:
        for item in self.inner.items():
            item.prompt = f"{self.salt} {item.prompt}"
            item.input_tokens += self.salt_tokens
            if item.messages:
                first = item.messages[0]
                item.messages[0] = {**first, "content": f"{self.salt} {first.get('content') or ''}"}
            yield item

    def describe(self) -> dict[str, Any]:
        return self.inner.describe() | {"prompt_salt": {"text": self.salt, "tokens": self.salt_tokens}}
