"""Real workloads, pure and seeded: dataset prompts, length pairs sampled from a log, a trace on its
own clock, and shared prefixes in front of any of them. Files are read by adapters; these take data."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.lengths import LengthDist
from tokenpace.core.prompts import PromptMaker
from tokenpace.core.workload import WorkItem


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    """One item of a dataset: user turns (a plain prompt has one), the replies recorded with them
    (ShareGPT), the expected output length when the file gives one, or a chat to send as it is."""

    turns: tuple[str, ...] = ()
    replies: tuple[str, ...] = ()
    output_len: int | None = None
    messages: tuple[dict[str, str], ...] | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class TraceRow:
    timestamp_s: float
    input_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    hash_ids: tuple[int, ...] = ()
    prefix_tokens: int | None = None


def stable_seed(*parts: Any) -> int:
    """A seed from values, the same in every process (``hash`` of a str is not)."""
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


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


@dataclass
class TraceWorkload:
    """A trace replayed in order on its own clock (divided by ``speedup``). Requests that share a
    hash id share that block of prompt (``block_tokens`` tokens each, Mooncake-style); requests that
    share a prefix id share their first ``prefix_tokens`` tokens."""

    rows: Sequence[TraceRow]
    speedup: float = 1.0
    seed: int = 0
    block_tokens: int = 512
    maker: PromptMaker = field(default_factory=PromptMaker)
    source: dict[str, Any] = field(default_factory=dict)
    prefix_tokens: int | None = None  # shared tokens of a prefix id (default: the group's shortest input)

    def offsets(self) -> Iterator[float]:
        t0 = self.rows[0].timestamp_s
        for row in self.rows:
            yield (row.timestamp_s - t0) / self.speedup

    @property
    def span_s(self) -> float:
        return (self.rows[-1].timestamp_s - self.rows[0].timestamp_s) / self.speedup

    def _block(self, key: Any, n: int, cache: dict[Any, str]) -> str:
        if key not in cache:
            rng = np.random.default_rng(stable_seed(self.seed, key))
            cache[key] = self.maker.make(n, rng)[0]
        return cache[key]

    def items(self) -> Iterator[WorkItem]:
        rng = np.random.default_rng(self.seed)
        blocks: dict[Any, str] = {}
        group_min: dict[str, int] = {}
        for row in self.rows:
            if row.prefix_id is not None:
                group_min[row.prefix_id] = min(
                    group_min.get(row.prefix_id, row.input_tokens), row.input_tokens
                )
        seen: dict[Any, int] = {}
        for index, row in enumerate(self.rows):
            parts: list[str] = []
            shared = 0
            key: Any = None
            if row.hash_ids:
                full = min(len(row.hash_ids), row.input_tokens // self.block_tokens)
                parts += [self._block(("h", h), self.block_tokens, blocks) for h in row.hash_ids[:full]]
                shared = self.block_tokens * full
                key = ("h", row.hash_ids[0])
            elif row.prefix_id is not None:
                shared = row.prefix_tokens or self.prefix_tokens or group_min[row.prefix_id]
                shared = min(shared, row.input_tokens)
                parts.append(self._block(("p", row.prefix_id, shared), shared, blocks))
                key = ("p", row.prefix_id)
            if row.input_tokens > shared or not parts:
                parts.append(self.maker.make(max(1, row.input_tokens - shared), rng)[0])
            prompt = " ".join(parts)
            cold = None if key is None else key not in seen
            pid = None if key is None else seen.setdefault(key, len(seen))
            count = self.maker.counter.count(prompt)
            yield WorkItem(index, prompt, count, row.output_tokens, prefix_id=pid, prefix_cold=cold)

    def describe(self) -> dict[str, Any]:
        ins = np.array([r.input_tokens for r in self.rows])
        outs = np.array([r.output_tokens for r in self.rows])
        return {
            "kind": "trace",
            **self.source,
            "rows": len(self.rows),
            "speedup": self.speedup,
            "span_s": self.span_s,
            "block_tokens": self.block_tokens,
            "input_len": {"spec": f"trace (mean {ins.mean():.0f})"},
            "output_len": {"spec": f"trace (mean {outs.mean():.0f})"},
            "seed": self.seed,
            "tokenizer": self.maker.describe(),
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
