"""A virtual run that keeps no records (`--summary-only`) gives what the records give: the same
requests, tokens, window, cache hits and preemptions, percentiles within the sketch's 1 %."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_profile, run_virtual, summarize_virtual
from tokenpace.sim.virtual_time.replicas import run_replicated, run_replicated_streamed
from tokenpace.sim.virtual_time.virtual import run_virtual_streamed
from tokenpace.sim.virtual_time.virtual_stream import SAMPLE_CAP, StrideSample
from tokenpace.sim.virtual_time.virtual_summary import steps_of
from tokenpace.testing.procs import run_cli

LOADS = {
    "ladder-prefix": VirtualLoad(
        input_len=parse_length("lognormal:512,0.5"),
        output_len=parse_length("8:200"),
        rates=(20.0, 60.0),
        step_duration_s=10,
        shared_prefix=64,
        seed=3,
    ),
    "closed-preempt": VirtualLoad(
        input_len=parse_length("64:600"),
        output_len=parse_length("1:300"),
        concurrency=32,
        requests=150,
        seed=5,
    ),
}


def _profile(name: str):
    base = get_profile()
    return (
        base.with_overrides(engine={"num_gpu_blocks": 300, "eos_prob": 0.02}) if "preempt" in name else base
    )


def _agree(exact, streamed) -> None:
    c, s = exact.client, streamed.client
    assert s.counts["ok"] == c.counts["ok"]
    assert s.window_s == pytest.approx(c.window_s, rel=1e-9)
    assert s.request_throughput == pytest.approx(c.request_throughput, rel=1e-9)
    assert s.output_token_throughput == pytest.approx(c.output_token_throughput, rel=1e-9)
    assert (streamed.cached_tokens, streamed.preemptions) == (exact.cached_tokens, exact.preemptions)
    for name in ("ttft_ms", "tpot_ms", "e2e_ms"):
        got, want = getattr(s, name), getattr(c, name)
        assert got.n == want.n
        for p in ("p50", "p90", "p95", "p99"):
            assert getattr(got, p) == pytest.approx(getattr(want, p), rel=0.0101, abs=1e-6), (name, p)
    assert streamed.engine_queue_ms.p50 == pytest.approx(exact.engine_queue_ms.p50, rel=0.0101, abs=1e-3)


@pytest.mark.parametrize("name", sorted(LOADS))
def test_the_streamed_run_agrees_with_the_records(name):
    load, profile = LOADS[name], _profile(name)
    exact = [summarize_virtual(r, with_ci=False) for _, r in steps_of(load, run_virtual(load, profile))]
    streamed = [step.summary() for step in run_virtual_streamed(load, profile)]
    assert len(streamed) == len(exact)
    for e, s in zip(exact, streamed, strict=True):
        _agree(e, s)


def test_replicas_merge_their_steps():
    load = LOADS["ladder-prefix"]
    exact = [
        summarize_virtual(r, with_ci=False)
        for _, r in steps_of(load, run_replicated(load, get_profile(), get_profile().network, 3))
    ]
    streamed = run_replicated_streamed(load, get_profile(), get_profile().network, 3)
    for e, s in zip(exact, streamed, strict=True):
        _agree(e, s.summary())


def test_the_cli_says_records_were_not_kept(tmp_path):
    out = tmp_path / "run.json"
    r = run_cli("sim", "--virtual", "--rate", "5", "--duration", "10s", "--summary-only", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "records not kept (summary only)" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["requests"].startswith("records not kept")
    assert doc["steps"][0]["records"].startswith("records not kept")
    assert doc["steps"][0]["ttft_ms"]["n"] == doc["steps"][0]["counts"]["ok"] > 0


def test_a_summary_only_run_writes_the_predicted_sweep_its_records_would(tmp_path):
    """The sketches' percentiles within their 1 %, the same requests, a stride sample for select."""
    docs = []
    for extra in (["--summary-only"], []):
        path = tmp_path / f"p{len(extra)}.json"
        args = ("--rate", "5,30", "--duration", "150s", "--input-len", "64:600", "--output-len", "1:200")
        r = run_cli("sim", "--virtual", *args, *extra, "--predicted-sweep", str(path))
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(path.read_text()))
    streamed, records = docs
    assert streamed["predicted"] == records["predicted"]
    for s, e in zip(streamed["steps"], records["steps"], strict=True):
        assert s["conditions"] == e["conditions"] and s["predicted"]
        assert s["summary"]["counts"]["ok"] == e["summary"]["counts"]["ok"]
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            for p in ("p50", "p95", "p99"):
                assert s["summary"][metric][p] == pytest.approx(e["summary"][metric][p], rel=0.01)
        n = s["summary"]["counts"]["ok"]
        kept = len(s["sample"]["ttft_ms"])
        assert kept == len(s["sample"]["tpot_ms"]) <= SAMPLE_CAP and kept >= min(n, SAMPLE_CAP // 2)
        assert None in s["sample"]["tpot_ms"]  # one-token outputs have no TPOT, as in the records'
    assert len(streamed["steps"][1]["sample"]["ttft_ms"]) < streamed["steps"][1]["summary"]["counts"]["ok"]


def test_the_stride_sample_keeps_every_stride_th_row_whatever_the_chunks():
    sample = StrideSample(100)
    rng = np.random.default_rng(0)
    n = 0
    while n < 5_000:
        k = int(rng.integers(1, 700))
        sample.add(np.repeat(np.arange(n, n + k, dtype=float)[:, None], 3, axis=1))
        n += k
    kept = sample.rows[:, 0]
    assert 50 < len(kept) <= 100
    assert kept.tolist() == list(range(0, n, sample.stride))
