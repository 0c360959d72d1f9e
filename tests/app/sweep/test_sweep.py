"""Sweep use case against scripted servers: steps, same workload, early stops, interruption, auto."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.sweep.sweep import Sweep, SweepConfig, rate_steps
from tokenpace.app.sweep.sweep_lengthen import step_rps
from tokenpace.core.metrics import Slo
from tokenpace.testing.scripted_server import Script, ScriptedServer

FAST = Script(ttft_s=0.01, itl_s=0.002)


def base(url: str, **kw: Any) -> BenchConfig:
    defaults = {"input_len": "8:64", "output_len": "4", "requests": 8, "timeout_s": 5.0, "seed": 7}
    return bench_config(url, **{**defaults, **kw})


async def sweep(script=FAST, stop_during_step=None, records=None, **kw):
    bench_kw = {k: kw.pop(k) for k in list(kw) if k in ("requests", "slo", "model")}
    kw.setdefault("revisit", False)  # the drift check has its own tests
    async with ScriptedServer(script) as srv:
        cfg = SweepConfig(base=base(srv.url, **bench_kw), **kw)

        def on_start(index, phase, mode, load, run):
            if stop_during_step == index:
                asyncio.get_running_loop().call_later(0.03, runner.stop)

        def on_record(index, record):
            if records is not None:
                records.setdefault(index, []).append(record)

        runner = Sweep(cfg, "sw1", on_step_start=on_start, on_record=on_record)
        return await runner.run()


def test_one_full_run_per_step_with_the_same_workload():
    records: dict = {}
    result = asyncio.run(sweep(mode="concurrency", steps=[1, 2, 4], records=records))
    assert [s.load for s in result.steps] == [1, 2, 4]
    assert result.stop_reason == "completed" and not result.interrupted
    loads = [s.result.conditions["load"]["concurrency"] for s in result.steps]
    assert loads == [1, 2, 4]
    prompts = [sorted(r.prompt_tokens_requested for r in s.result.records) for s in result.steps]
    assert prompts[0] == prompts[1] == prompts[2]  # same seed, same workload at every step
    assert len({s.result.run_id for s in result.steps}) == 3
    assert {len(v) for v in records.values()} == {8} and sorted(records) == [1, 2, 3]
    assert result.steps[1].result.conditions["labels"] == {"sweep_id": "sw1", "sweep_step": "2"}
    doc = result.to_dict({1: "a.jsonl"})
    assert doc["kind"] == "sweep" and len(doc["steps"]) == 3 and doc["probe"] == []
    assert doc["steps"][0]["records"]["path"] == "a.jsonl"
    assert doc["steps"][2]["sweep_step"] == {
        "index": 3, "phase": "step", "mode": "concurrency", "load": 4,
        "lengthened": 1, "superseded_as_short": False,
    }  # fmt: skip
    assert "knee_ttft_p95" in doc["analysis"] and "watermark_rps_per_replica" in doc["plan"]
    assert doc["analysis"]["littles_law"]["steps"][0]["status"] in ("ok", "inconsistent")


def test_the_first_step_is_revisited_after_the_last_and_kept_off_the_curve():
    result = asyncio.run(sweep(mode="concurrency", steps=[1, 2, 4], revisit=True, requests=40))
    assert [(s.phase, s.load) for s in result.steps] == [
        ("step", 1),
        ("step", 2),
        ("step", 4),
        ("revisit", 1),
    ]
    doc = result.to_dict()
    assert len(doc["steps"]) == 3 and doc["revisit"][0]["sweep_step"]["phase"] == "revisit"
    revisit = doc["analysis"]["drift"]["revisit"]  # compared with step 1 (unless a busy machine
    assert revisit is None or revisit["step"] == 1  # left either out as NOT VALID)
    assert "time_trend" in doc["steps"][0]
    assert result.steps[3].result.conditions["labels"]["sweep_phase"] == "revisit"  # select skips it


def test_rate_steps_run_open_loop():
    result = asyncio.run(sweep(mode="rate", steps=[20, 40], requests=6))
    loads = [s.result.conditions["load"] for s in result.steps]
    assert [(ld["mode"], ld["rate"]) for ld in loads] == [("open_loop", 20), ("open_loop", 40)]


def test_stops_early_when_errors_climb():
    result = asyncio.run(sweep(Script(http_status=500), mode="concurrency", steps=[1, 2, 4]))
    assert len(result.steps) == 1
    assert "errors climbed to 100%" in result.stop_reason
    kept = asyncio.run(sweep(Script(http_status=500), mode="concurrency", steps=[1, 2], keep_going=True))
    assert len(kept.steps) == 2


def test_stops_early_when_the_slo_is_broken_by_far():
    slow = Script(ttft_s=0.05, itl_s=0.002)
    result = asyncio.run(sweep(slow, mode="concurrency", steps=[1, 2], slo=Slo(ttft_ms=10)))
    assert len(result.steps) == 1 and "over 3x its SLO" in result.stop_reason
    assert result.stop_reason.startswith("stopped early after step 1")
    last = asyncio.run(sweep(slow, mode="concurrency", steps=[1], slo=Slo(ttft_ms=10)))
    assert last.stop_reason == "completed"  # the last step broke it: nothing was skipped


def test_stop_keeps_finished_steps_and_the_partial_one():
    slow = Script(ttft_s=0.02, itl_s=0.01)
    result = asyncio.run(sweep(slow, mode="concurrency", steps=[1, 1, 1], requests=20, stop_during_step=2))
    assert result.interrupted and len(result.steps) == 2
    assert not result.steps[0].result.interrupted and result.steps[1].result.interrupted
    assert len(result.steps[1].result.records) < 20
    assert result.to_dict()["steps"][1]["interrupted"] is True


def test_auto_rate_probes_then_places_rate_steps_up_to_the_maximum():
    # a fixed-latency server never plateaus, so the probe doubles to its cap (4)
    result = asyncio.run(sweep(mode="rate", auto=True, auto_steps=3, max_probe_concurrency=4, requests=40))
    probe = [s for s in result.steps if s.phase == "probe"]
    curve = result.curve()
    assert [s.load for s in probe] == [1, 2, 4]
    best = max(step_rps(s.result) for s in probe)
    assert [s.mode for s in curve] == ["rate"] * 3
    assert curve[-1].load == pytest.approx(best, rel=0.01) and curve[0].load < best / 5
    doc = result.to_dict()
    assert len(doc["probe"]) == 3 and len(doc["steps"]) == 3


def test_auto_reruns_a_short_step_longer_and_keeps_the_short_attempt():
    # 6 requests make no steady window (fewer than 20 completions): each step is rerun with more
    result = asyncio.run(sweep(mode="concurrency", auto=True, max_probe_concurrency=2, requests=6))
    short = [s for s in result.steps if s.superseded]
    curve = result.curve()
    assert [s.load for s in short] == [1, 2] and all(s.result.summary.counts["sent"] == 6 for s in short)
    assert [s.load for s in curve] == [1, 2]
    for s in curve:
        assert s.lengthened > 1 and s.result.summary.counts["sent"] == 6 * s.lengthened
        steady = s.result.summary.extra["steady"]
        assert not steady["short"] and steady["excluded_ramp_up_s"] > 0 and steady["excluded_drain_s"] > 0
    doc = result.to_dict()
    assert len(doc["short_attempts"]) == 2 and len(doc["steps"]) == 2
    assert all(d["summary"]["steady"]["short"] for d in doc["short_attempts"])


@pytest.mark.timing  # which step is short depends on how fast a busy machine ran it
def test_a_listed_sweep_flags_a_short_step_and_leaves_it_out():
    result = asyncio.run(sweep(mode="concurrency", steps=[1, 2, 8], requests=24))
    assert not any(s.superseded for s in result.steps)  # no rerun without --auto
    doc = result.to_dict()
    assert doc["steps"][2]["summary"]["steady"]["short"] is True  # 24 requests on 8 users: 3 rounds
    assert doc["analysis"]["used_steps"] == [1, 2]
    assert doc["analysis"]["left_out_steps"][0]["step"] == 3
    assert doc["analysis"]["left_out_steps"][0]["reasons"][0].startswith("short (")


def test_rate_steps_span_low_to_max_denser_near_the_max():
    steps = rate_steps(10.0, 5, 0.1)
    assert steps[0] == 1.0 and steps[-1] == 10.0
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    assert all(g > 0 for g in gaps) and gaps == sorted(gaps, reverse=True)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"steps": []}, "give the steps"),
        ({"steps": [1.5]}, "whole number"),
        ({"steps": [0]}, "positive"),
        ({"steps": [1], "auto": True}, "--auto"),
        ({"steps": [1], "headroom": 1.0}, "headroom"),
    ],
)
def test_bad_sweep_configs_are_refused(kw, message):
    cfg = SweepConfig(base=base("http://127.0.0.1:9/v1", concurrency=1), mode="concurrency", **kw)
    with pytest.raises(ValueError, match=message):
        cfg.validate()
