"""A trace on its own clock (timestamps, lengths, prefix hash blocks) as a workload. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.workload.item import WorkItem, stable_seed
from tokenpace.core.workload.prompts import PromptMaker

# Tokens one request of a trace may claim (input or output): far above any model's context (1-2 M),
# far below what would allocate gigabytes of prompt. A trace's claim past it is refused, not believed.
MAX_REQUEST_TOKENS = 10_000_000
# How long a trace may take to replay (its last request's time after its first, at its speed-up):
# a week. Past it the trace is refused: a wrong unit (ns read as s) would make a run wait for years.
MAX_REPLAY_S = 7 * 86_400.0


@dataclass(frozen=True, slots=True)
class TraceRow:
    timestamp_s: float
    input_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    hash_ids: tuple[int, ...] = ()
    prefix_tokens: int | None = None
    api: str | None = None  # the API the request was made to (records replayed: see replay.py)
    prompt: str | None = None  # the real prompt, where the records kept it (sent as it was)
    # the input is a captured server's count, its chat template's tokens in it (replay.py: records
    # that cannot say how many): longer than the prompt was, unless those tokens are given
    template_in_input: bool = False


def replay_problem(rows: Sequence[TraceRow], speedup: float = 1.0) -> str | None:
    """Why these rows cannot be replayed on their clock (a timestamp not finite, a replay longer
    than MAX_REPLAY_S), or None."""
    if not math.isfinite(speedup) or speedup <= 0:
        return "--speedup must be a finite number above 0"
    for i, row in enumerate(rows, start=1):
        if not math.isfinite(row.timestamp_s):
            return f"request {i}'s timestamp is not a finite number"
    if len(rows) > 1:
        span = (max(r.timestamp_s for r in rows) - min(r.timestamp_s for r in rows)) / speedup
        if not span <= MAX_REPLAY_S:
            return (
                f"the trace would take {span:.3g} s to replay, more than {MAX_REPLAY_S / 86_400:g} days "
                "(its timestamps in another unit? see --trace-time-unit; or use --speedup, --trace-window)"
            )
    return None


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
            if row.prompt is not None:  # the real prompt: its own length, its own prefixes
                count = self.maker.counter.count(row.prompt)
                yield WorkItem(index, row.prompt, count, row.output_tokens)
                continue
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
