"""Results broken down by what was sent: length bins, turn index, cold vs warm prefix; and the
asked vs server-reported prompt length check. Pure: records in, numbers out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tokenpace.core.metrics import NS_PER_MS, e2e_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import describe

# Upper edges (inclusive) of the default bins; the last bin is open.
INPUT_EDGES = (128, 512, 2048, 8192)
OUTPUT_EDGES = (64, 256, 1024)
PROMPT_MISMATCH = 0.02  # |server / asked - 1| above this is flagged


def bin_label(value: int, edges: Sequence[int]) -> str:
    low = 1
    for edge in edges:
        if value <= edge:
            return f"{low}-{edge}"
        low = edge + 1
    return f">{edges[-1]}"


def _asked_input(r: RequestRecord) -> int:
    return r.prompt_tokens_requested or r.prompt_tokens or 0


def _asked_output(r: RequestRecord) -> int:
    return r.output_tokens_requested or r.output_tokens


def _latency(rs: Sequence[RequestRecord]) -> dict[str, Any]:
    ok = [r for r in rs if r.status is Status.OK]

    def pct(fn: Callable[[RequestRecord], float | None]) -> dict[str, Any]:
        d = describe([v / NS_PER_MS for v in (fn(r) for r in ok) if v is not None])
        cis = {k: list(d.ci95[k]) for k in ("p50", "p90", "p99") if k in d.ci95}
        return {"n": d.n, "p50": d.p50, "p90": d.p90, "p99": d.p99, "mean": d.mean, "ci95": cis}

    return {
        "n": len(rs),
        "ok": len(ok),
        "ttft_ms": pct(ttft_ns),
        "tpot_ms": pct(tpot_ns),
        "e2e_ms": pct(e2e_ns),
    }


def _measured(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup]


def by_length_bins(
    records: Iterable[RequestRecord],
    input_edges: Sequence[int] = INPUT_EDGES,
    output_edges: Sequence[int] = OUTPUT_EDGES,
) -> dict[str, Any]:
    """Latency per (input bin x output bin) of the asked lengths, bins in increasing order."""
    cells: dict[tuple[int, int], list[RequestRecord]] = {}
    ins, outs = list(input_edges), list(output_edges)

    def index(v: int, edges: list[int]) -> int:
        return next((i for i, e in enumerate(edges) if v <= e), len(edges))

    for r in _measured(records):
        key = (index(_asked_input(r), ins), index(_asked_output(r), outs))
        cells.setdefault(key, []).append(r)
    rows = []
    for (i, o), rs in sorted(cells.items()):
        rows.append(
            {
                "input_bin": bin_label(ins[i] if i < len(ins) else ins[-1] + 1, ins),
                "output_bin": bin_label(outs[o] if o < len(outs) else outs[-1] + 1, outs),
                **_latency(rs),
            }
        )
    return {"input_edges": ins, "output_edges": outs, "basis": "asked lengths", "cells": rows}


def by_turn(records: Iterable[RequestRecord]) -> list[dict[str, Any]]:
    """Latency per turn index of multi-turn sessions (0 = first turn), with the prompt size."""
    turns: dict[int, list[RequestRecord]] = {}
    for r in _measured(records):
        if r.turn is not None:
            turns.setdefault(r.turn, []).append(r)
    out = []
    for t, rs in sorted(turns.items()):
        asked = [_asked_input(r) for r in rs]
        out.append({"turn": t, "prompt_tokens_mean": sum(asked) / len(asked), **_latency(rs)})
    return out


def by_prefix_state(records: Iterable[RequestRecord]) -> dict[str, Any]:
    """Cold (first use of a shared prefix) vs warm requests."""
    cold = [r for r in _measured(records) if r.prefix_cold is True]
    warm = [r for r in _measured(records) if r.prefix_cold is False]
    return {"cold": _latency(cold), "warm": _latency(warm)}


MAX_TEMPLATE_TOKENS = 32  # a constant difference up to this is a chat template's


def prompt_check(records: Iterable[RequestRecord], tolerance: float = PROMPT_MISMATCH) -> dict[str, Any]:
    """Asked vs server-reported prompt tokens of ok requests; mismatch when the totals differ by
    more than ``tolerance`` (chat templates add a few tokens per message)."""
    pairs = [
        (r.prompt_tokens_requested, r.prompt_tokens)
        for r in _measured(records)
        if r.status is Status.OK and r.prompt_tokens_requested and r.prompt_tokens is not None
    ]
    if not pairs:
        return {"compared": 0, "mismatch": False}
    asked = sum(a for a, _ in pairs)
    server = sum(s for _, s in pairs)
    ratio = server / asked
    # A chat template adds the same few tokens to every request: when the difference is that
    # constant (within a token) and that small, it is taken as the template's, and the check is on
    # the rest. Across different asked lengths that is certain; at one asked length a tokenizer
    # off by the same few tokens on every prompt would look the same ("constant at one length").
    diffs = sorted(s - a for a, s in pairs)
    overhead = diffs[len(diffs) // 2]
    lengths_vary = len({a for a, _ in pairs}) > 1
    if not (diffs[-1] - diffs[0] <= 1 and 0 < overhead <= MAX_TEMPLATE_TOKENS):
        overhead = 0
    residual = (server - overhead * len(pairs)) / asked
    per_request = [abs(s - overhead - a) / a for a, s in pairs]
    return {
        "compared": len(pairs),
        "asked_total": asked,
        "server_total": server,
        "server_over_asked": ratio,
        "template_overhead_tokens": overhead,
        "template_overhead_basis": ("varied lengths" if lengths_vary else "constant at one length")
        if overhead
        else None,
        "server_over_asked_without_template": residual,
        "mean_abs_diff_tokens": sum(abs(s - a) for a, s in pairs) / len(pairs),
        "requests_off_by_more": sum(d > tolerance for d in per_request),
        "tolerance": tolerance,
        "mismatch": abs(residual - 1) > tolerance,
    }


def breakdown(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Every breakdown that applies to these records."""
    out: dict[str, Any] = {"length_bins": by_length_bins(records)}
    if any(r.turn is not None for r in records):
        out["turns"] = by_turn(records)
    if any(r.prefix_cold is not None for r in records):
        out["prefix"] = by_prefix_state(records)
    return out
