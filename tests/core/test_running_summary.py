"""The streaming summary: percentiles within the sketch's stated error of numpy's, everything else
exactly what ``summarize`` gives, in a memory that does not grow with the records."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.metrics import Slo, summarize
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.running_summary import MAX_ERROR_REASONS, OTHER_REASONS, RunningSummary, is_sketch
from tokenpace.core.sketch import RELATIVE_ERROR, LogSketch
from tokenpace.core.stats import PERCENTILES

MS = 1_000_000


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.lognormal(mean=3.0, sigma=1.5, size=n),  # heavy right tail
        lambda rng, n: (rng.pareto(1.2, size=n) + 1) * 20,  # power-law tail
        lambda rng, n: np.concatenate([rng.normal(30, 2, n // 2), rng.normal(900, 50, n - n // 2)]),
    ],
)
def test_sketch_percentiles_within_stated_error_of_numpy(draw: object) -> None:
    rng = np.random.default_rng(7)
    values = draw(rng, 20_000)  # type: ignore[operator]
    sketch = LogSketch()
    for part in np.array_split(values, 13):  # fed in batches, as the writer does
        sketch.add_many(part)
    qs = [*PERCENTILES, 1, 10, 99.9]
    got = sketch.percentiles(qs)
    want = np.percentile(values, qs)
    for q, g, w in zip(qs, got, want, strict=True):
        assert abs(g - w) <= RELATIVE_ERROR * abs(w) + 1e-9, (q, g, w)
    dist = sketch.distribution()
    assert dist.n == len(values) and dist.min == values.min() and dist.max == values.max()
    assert dist.mean == pytest.approx(values.mean(), rel=1e-9)
    assert dist.std == pytest.approx(values.std(ddof=1), rel=1e-6)


def test_sketch_memory_does_not_grow_with_values() -> None:
    sketch = LogSketch()
    size = sketch.counts.nbytes
    sketch.add_many(np.random.default_rng(1).lognormal(2, 2, 200_000))
    sketch.add_many([0.0, -3.0, 1e15])  # below and past the bucket range
    assert sketch.counts.nbytes == size <= 16 * 1024
    assert sketch.n == 200_003 and sketch.percentiles([0])[0] == -3.0 and sketch.percentiles([100])[0] == 1e15


def _records(n: int, seed: int = 3) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sent = (i + 1) * 50 * MS
        ttft = int(rng.lognormal(np.log(40), 0.8) * MS)
        gaps = (rng.lognormal(np.log(8), 0.5, size=int(rng.integers(1, 30))) * MS).astype(int)
        tokens = [sent + ttft + int(g) for g in np.cumsum(np.concatenate([[0], gaps]))]
        status = Status.OK if i % 10 else (Status.HTTP_ERROR if i % 20 else Status.TIMEOUT)
        out.append(
            RequestRecord(
                request_id=f"r{i}",
                scheduled_ns=sent,
                dispatched_ns=sent,
                sent_ns=sent,
                connect_ns=2 * MS if i % 7 == 0 else None,
                request_ns=sent + MS,
                headers_ns=sent + ttft // 2,
                first_token_ns=tokens[0],
                first_answer_ns=tokens[0],
                token_ns=tokens,
                end_ns=tokens[-1] + MS,
                output_tokens_counted=len(tokens),
                output_tokens_server=len(tokens) + (i % 3 == 0),
                prompt_tokens=100 + i % 50,
                status=status,
                error=None if status is Status.OK else f"HTTP {500 + i % 3}",
            )
        )
    return out


def test_running_summary_matches_summarize() -> None:
    records = _records(600)
    slo = Slo(ttft_ms=60, tpot_ms=12)
    running = RunningSummary(slo)
    for i in range(0, len(records), 64):
        running.add(records[i : i + 64])
    got, want = running.to_dict(), summarize(records, slo, with_ci=False).to_dict()
    assert is_sketch(got) and got["sketch"]["relative_error"] == RELATIVE_ERROR
    assert set(got) - {"percentiles_from", "sketch"} == set(want)
    for key in ("counts", "errors", "tokens", "error_rate", "timeout_rate", "reasoning", "slo", "window_s"):
        assert got[key] == want[key], key
    for key in ("request_throughput", "output_token_throughput", "goodput", "goodput_ratio"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms", "output_tokens", "prompt_tokens"):
        g, w = got[name], want[name]
        assert g["n"] == w["n"] and g["min"] == w["min"] and g["max"] == w["max"], name
        assert g["mean"] == pytest.approx(w["mean"], rel=1e-9), name
        for p in ("p50", "p90", "p95", "p99"):
            assert abs(g[p] - w[p]) <= RELATIVE_ERROR * abs(w[p]) + 1e-9, (name, p)
    net_g, net_w = got["network"], want["network"]
    assert net_g["new_connections"] == net_w["new_connections"] > 0
    assert net_g["ttft_cold_ms"]["n"] == net_w["ttft_cold_ms"]["n"]


def test_error_reasons_are_bounded() -> None:
    running = RunningSummary()
    records = [
        RequestRecord(
            request_id=f"r{i}", sent_ns=MS, end_ns=2 * MS, status=Status.HTTP_ERROR, error=f"id {i}"
        )
        for i in range(MAX_ERROR_REASONS + 40)
    ]
    running.add(records)
    errors = running.to_dict()["errors"]
    assert len(errors) == MAX_ERROR_REASONS + 1 and errors[OTHER_REASONS] == 40
    assert sum(errors.values()) == len(records)
