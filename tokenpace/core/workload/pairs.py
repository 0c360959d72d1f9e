"""(input, output) length pairs sampled from a log, as a workload. Pure and seeded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem
from tokenpace.core.workload.prompts import PromptMaker


@dataclass
class PairsWorkload:
    """Synthetic prompts whose (input, output) lengths are drawn as pairs from a log: the joint
    distribution is kept (a long input keeps its own output length)."""

    pairs: np.ndarray  # shape (n, 2): input tokens, output tokens
    seed: int = 0
    maker: PromptMaker = field(default_factory=PromptMaker)
    source: dict[str, Any] = field(default_factory=dict)

    def sample(self, n: int) -> np.ndarray:
        """The first n pairs ``items`` sends (for the fit report)."""
        return self.pairs[np.random.default_rng(self.seed).integers(0, len(self.pairs), size=n)]

    def items(self) -> Iterator[WorkItem]:
        rng = np.random.default_rng(self.seed)
        text_rng = np.random.default_rng([self.seed, 7919])
        index = 0
        while True:
            for i in rng.integers(0, len(self.pairs), size=256):
                n_in, n_out = (int(x) for x in self.pairs[i])
                prompt, got = self.maker.make(n_in, text_rng)
                yield WorkItem(index, prompt, got, n_out)
                index += 1

    def describe(self) -> dict[str, Any]:
        ins, outs = self.pairs[:, 0], self.pairs[:, 1]
        return {
            "kind": "lengths_from_log",
            **self.source,
            "pairs": len(self.pairs),
            "input_len": {"spec": f"log ({len(self.pairs)} pairs, mean {ins.mean():.0f})"},
            "output_len": {"spec": f"log (mean {outs.mean():.0f})"},
            "seed": self.seed,
            "tokenizer": self.maker.describe(),
        }
