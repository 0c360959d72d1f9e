"""Prompts of a chosen token length, and the token counter that says how long a text is. Pure.

Three counters: the labelled word estimate (one token per whitespace word: true for the built-in
word list in GPT/Llama/Qwen vocabularies, only an estimate for other text), a real tokenizer (any
object with ``encode``, e.g. a Hugging Face ``tokenizers.Tokenizer``), and a word list checked
against the server's ``/tokenize`` (words the server counts as one token each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tokenpace.core.workload.words import WORDS

# Rounds of add/drop a word before a prompt is accepted at its nearest length.
_FIT_ROUNDS = 48


class TokenizerError(ValueError):
    """A tokenizer (a local file or the server's /tokenize) cannot be used; the message is for the user."""


class TokenCounter(Protocol):
    @property
    def exact(self) -> bool:
        """True when ``count`` is the real tokenizer's count."""
        ...

    def count(self, text: str) -> int: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class WordEstimate:
    """One token per whitespace-separated word: an estimate, labelled as one."""

    exact: bool = False

    def count(self, text: str) -> int:
        return len(text.split())

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "estimate",
            "exact": False,
            "method": "one token per whitespace word (the synthetic words are one token each in "
            "GPT/Llama/Qwen vocabularies; other text is only estimated)",
        }


@dataclass(frozen=True, slots=True)
class EncodeCounter:
    """A real tokenizer: ``encode(text) -> list of ids``, special tokens left out."""

    encode: Callable[[str], Sequence[int]]
    source: str
    exact: bool = True

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def describe(self) -> dict[str, Any]:
        return {"kind": "tokenizer", "exact": True, "source": self.source}


@dataclass(frozen=True, slots=True)
class CheckedWords:
    """Words the server's ``/tokenize`` counts as one token each: prompts made of them are exact;
    other text is counted as words (an estimate)."""

    words: tuple[str, ...]
    source: str
    verified: dict[str, Any] = field(default_factory=dict)
    exact: bool = False

    def count(self, text: str) -> int:
        return len(text.split())

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "server",
            "exact": False,
            "source": self.source,
            "method": f"synthetic prompts use {len(self.words)} words the server counts as one "
            "token each; dataset text is estimated as one token per word",
            **({"verified": self.verified} if self.verified else {}),
        }


def single_token_words(counter: TokenCounter, words: Sequence[str] = WORDS) -> tuple[str, ...]:
    """Words that add exactly one token in the middle of a text (with their leading space)."""
    if not counter.exact:
        return tuple(words)
    base = counter.count("the")
    kept = tuple(w for w in words if counter.count(f"the {w}") - base == 1)
    return kept if len(kept) >= 16 else tuple(words)


class PromptMaker:
    """Texts of n tokens by ``counter``: exact with a real tokenizer (words added or dropped until
    the count matches), n words otherwise."""

    def __init__(self, counter: TokenCounter | None = None, words: Sequence[str] | None = None) -> None:
        self.counter: TokenCounter = counter or WordEstimate()
        if words is None:
            words = getattr(self.counter, "words", None) or single_token_words(self.counter)
        self.words = np.asarray(tuple(words))
        self.missed = 0  # prompts that could not hit their length exactly

    def make(self, n: int, rng: np.random.Generator) -> tuple[str, int]:
        """A text and its token count (n, unless a tokenizer made that impossible)."""
        picks = list(self.words[rng.integers(0, len(self.words), size=max(int(n), 1))])
        if not self.counter.exact:
            return " ".join(picks), len(picks)
        return self._fit(picks, int(n), rng)

    def _fit(self, picks: list[str], n: int, rng: np.random.Generator) -> tuple[str, int]:
        count = self.counter.count(" ".join(picks))
        best = (abs(count - n), " ".join(picks), count)
        for _ in range(_FIT_ROUNDS):
            if count == n:
                return " ".join(picks), count
            if count > n and len(picks) > 1:
                del picks[-max(1, min(count - n, len(picks) - 1)) :]
            else:
                more = max(1, n - count)
                picks += list(self.words[rng.integers(0, len(self.words), size=more)])
            count = self.counter.count(" ".join(picks))
            if abs(count - n) < best[0]:
                best = (abs(count - n), " ".join(picks), count)
        self.missed += 1
        return best[1], best[2]

    def describe(self) -> dict[str, Any]:
        out = dict(self.counter.describe())
        out["vocabulary_words"] = len(self.words)
        if self.missed:
            out["prompts_off_length"] = self.missed
        return out
