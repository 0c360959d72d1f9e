"""Use case: turn the workload options (files already read) into the workload a run sends, resolve
the server's tokenizer before any load, and add the workload's own numbers to the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.breakdown import breakdown, prompt_check
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload import (
    DatasetEntry,
    DatasetWorkload,
    PairsWorkload,
    SyntheticWorkload,
    TokenizedSynthetic,
    TraceRow,
    TraceWorkload,
)
from tokenpace.core.workload.length_fit import length_fit
from tokenpace.core.workload.lengths import LengthDist
from tokenpace.core.workload.prefixes import SharedPrefixes
from tokenpace.core.workload.prompts import PromptMaker, TokenCounter
from tokenpace.core.workload.salt import SaltedPrompts, make_salt
from tokenpace.core.workload.sessions import SessionWorkload
from tokenpace.core.workload.trace import replay_problem

TRACE_ARRIVAL = "trace"


@dataclass
class WorkloadOptions:
    """What to send beyond synthetic lengths. Files are read (and checked) before the run starts."""

    dataset: list[DatasetEntry] | None = None
    length_pairs: np.ndarray | None = None
    trace: list[TraceRow] | None = None
    speedup: float = 1.0
    block_tokens: int = 512
    trace_window: str | None = None  # FROM:TO of the trace to replay
    prefix_len: int | None = None
    prefixes: int = 1
    turns: int = 1
    think_time_s: float = 0.0
    counter: TokenCounter | None = None  # a local tokenizer; None: the word estimate
    server_tokenizer: bool = False  # resolve the endpoint's /tokenize before the run
    source: dict[str, Any] = field(default_factory=dict)  # file paths and formats, for the record

    def validate(self) -> None:
        given = [n for n, v in (("--dataset", self.dataset), ("--lengths-from", self.length_pairs),
                                ("--trace", self.trace)) if v is not None]  # fmt: skip
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} each choose the prompts: give one")
        if not self.speedup > 0:
            raise ValueError("--speedup must be positive")
        why = replay_problem(self.trace, self.speedup) if self.trace is not None else None
        if why:
            raise ValueError(f"--trace: {why}")
        if self.prefix_len is not None and (self.prefix_len < 1 or self.prefixes < 1):
            raise ValueError("--prefix-len and --prefixes must be at least 1")
        if self.turns < 1:
            raise ValueError("--turns must be at least 1")
        if self.think_time_s < 0:
            raise ValueError("--think-time must not be negative")
        if self.trace is not None and self.turns > 1:
            raise ValueError("--trace replays single requests: it does not combine with --turns")

    @property
    def sessions(self) -> bool:
        return self.turns > 1

    def trace_rate(self) -> float:
        """Mean request rate of the trace at its speed-up (its conditions' 'rate')."""
        rows = self.trace or []
        span = (rows[-1].timestamp_s - rows[0].timestamp_s) / self.speedup if len(rows) > 1 else 0.0
        return len(rows) / span if span > 0 else float(len(rows))


def build(
    opts: WorkloadOptions | None,
    input_len: LengthDist,
    output_len: LengthDist,
    seed: int,
    counter: TokenCounter | None = None,
    salt_key: str | None = None,
) -> Any:
    """The workload to send; plain synthetic (as before issue 7) when nothing else was asked. With a
    ``salt_key`` (the run id unless the user chose one) every prompt starts with that run's salt."""
    opts = opts or WorkloadOptions()
    counter = counter or opts.counter
    maker = PromptMaker(counter) if counter is not None else PromptMaker()
    base: Any
    if opts.dataset is not None:
        base = DatasetWorkload(opts.dataset, output_len, seed, maker, opts.source)
    elif opts.length_pairs is not None:
        base = PairsWorkload(opts.length_pairs, seed, maker, opts.source)
    elif opts.trace is not None:
        base = TraceWorkload(
            opts.trace, opts.speedup, seed, opts.block_tokens, maker, opts.source, opts.prefix_len
        )
    elif counter is not None:
        base = TokenizedSynthetic(input_len, output_len, seed, maker)
    else:
        base = SyntheticWorkload(input_len, output_len, seed)
    if opts.prefix_len and opts.trace is None:  # a trace's prefix ids say who shares
        every = opts.turns if opts.sessions and not getattr(base, "multi_turn", False) else 1
        base = SharedPrefixes(base, opts.prefix_len, opts.prefixes, maker, seed, every)
    if salt_key is not None:  # before sessions: a chat's history starts salted
        base = SaltedPrompts(base, *make_salt(salt_key, maker))
    if opts.sessions:
        base = SessionWorkload(base, opts.turns, opts.think_time_s)
    return base


async def resolve_counter(
    opts: WorkloadOptions | None, endpoint: Any, model: str, headers: dict[str, Any]
) -> Any:
    """The server's tokenizer, asked before any load (None when not asked for)."""
    if opts is None or not opts.server_tokenizer:
        return None
    from tokenpace.app.watch.preflight import PreflightError
    from tokenpace.client.tokenize import server_words
    from tokenpace.core.workload.prompts import TokenizerError

    try:
        return await server_words(endpoint, model, headers)
    except TokenizerError as exc:
        raise PreflightError(str(exc)) from None


def summary_extra(workload: Any, records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The workload's numbers for the summary: breakdowns, asked vs server prompt tokens, and how
    well lengths sampled from a log match it."""
    out: dict[str, Any] = {"breakdown": breakdown(records), "prompt_tokens_check": prompt_check(records)}
    inner = workload
    while inner is not None and not isinstance(inner, PairsWorkload):
        inner = (
            getattr(inner, "source", None)
            if isinstance(inner, SessionWorkload)
            else getattr(inner, "inner", None)
        )
    if isinstance(inner, PairsWorkload):
        sent = [(r.prompt_tokens_requested or 0, r.output_tokens_requested or 0) for r in records]
        sampled = np.asarray(sent, dtype=np.int64).reshape(-1, 2) if sent else inner.sample(1)
        out["length_fit"] = length_fit(inner.pairs, sampled)
    return out


def warnings(extra: dict[str, Any]) -> list[str]:
    out = []
    check = extra.get("prompt_tokens_check") or {}
    if check.get("mismatch"):
        overhead = check.get("template_overhead_tokens") or 0
        if overhead:
            aside = f"with a chat template's {overhead} tokens a request set aside"
            hint = "--tokenizer gives exact prompts"
        else:  # the difference varies, or is more than a template adds: nothing to set aside
            aside = "the difference is not a chat template's constant few tokens"
            hint = "--tokenizer gives exact prompts"
        out.append(
            f"prompt tokens: the server counted {check['server_over_asked_without_template']:.1%} "
            f"of the asked ({aside}; "
            f"{check['server_total']} vs {check['asked_total']} over {check['compared']} requests), "
            f"more than {check['tolerance']:.0%} off ({hint})"
        )
    fit = extra.get("length_fit") or {}
    if fit and not fit.get("matches"):
        out.append(
            f"sampled lengths differ from the log more than chance allows (KS input "
            f"{fit['input']['ks']:.3f}, output {fit['output']['ks']:.3f} > {fit['ks_95_threshold']:.3f})"
        )
    return out
