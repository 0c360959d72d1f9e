"""What to send: seeded synthetic requests with input and output lengths from distributions, with
prompts of built-in one-token words or made to length by a real tokenizer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem
from tokenpace.core.workload.lengths import LengthDist
from tokenpace.core.workload.prompts import PromptMaker
from tokenpace.core.workload.words import WORDS


@dataclass(frozen=True, slots=True)
class SyntheticWorkload:
    input_len: LengthDist
    output_len: LengthDist
    seed: int = 0

    def items(self) -> Iterator[WorkItem]:
        """Endless, reproducible stream of requests: the same seed gives the same requests."""
        rng = np.random.default_rng(self.seed)
        words = np.asarray(WORDS)
        index = 0
        while True:
            # Lengths drawn in blocks to keep numpy call overhead off the per-request path.
            ins = self.input_len.sample(rng, 256)
            outs = self.output_len.sample(rng, 256)
            for n_in, n_out in zip(ins, outs, strict=True):
                prompt = " ".join(words[rng.integers(0, len(words), size=int(n_in))])
                yield WorkItem(index, prompt, int(n_in), int(n_out))
                index += 1

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "synthetic",
            "input_len": self.input_len.describe(),
            "output_len": self.output_len.describe(),
            "seed": self.seed,
            "prompt_words": "common English words, one token each in GPT/Llama/Qwen BPE vocabularies",
        }


@dataclass
class TokenizedSynthetic:
    """SyntheticWorkload's lengths, with prompts made to the asked length by a real tokenizer."""

    input_len: LengthDist
    output_len: LengthDist
    seed: int = 0
    maker: PromptMaker = field(default_factory=PromptMaker)

    def items(self) -> Iterator[WorkItem]:
        rng = np.random.default_rng(self.seed)
        text_rng = np.random.default_rng([self.seed, 7919])
        index = 0
        while True:
            ins = self.input_len.sample(rng, 256)
            outs = self.output_len.sample(rng, 256)
            for n_in, n_out in zip(ins, outs, strict=True):
                prompt, got = self.maker.make(int(n_in), text_rng)
                yield WorkItem(index, prompt, got, int(n_out))
                index += 1

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "synthetic",
            "input_len": self.input_len.describe(),
            "output_len": self.output_len.describe(),
            "seed": self.seed,
            "tokenizer": self.maker.describe(),
        }
