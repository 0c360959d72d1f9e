"""`--workers N`: one schedule sent by worker processes against the scripted server. The same
workload as one process, every record back in the parent, nothing lost when a worker dies, and the
health of every worker in the result."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.app.workers.ray_workers import RayUnavailableError
from tokenpace.app.workers.run_factory import make_run
from tokenpace.app.workers.workers import WorkerRun, worker_count
from tokenpace.core.record import Status
from tokenpace.testing.scripted_server import Script, ScriptedServer

FAST = Script(ttft_s=0.01, itl_s=0.002)


def config(url: str, **kw: Any) -> BenchConfig:
    # varied lengths: a mix-up between workers would show
    defaults = {"input_len": "16:64", "output_len": "4:12", "timeout_s": 10.0, "server_metrics": "off",
                "seed": 3}  # fmt: skip
    return bench_config(url, **{**defaults, **kw})


async def _run(script: Script, workers: int, run_id: str = "same", on_record=None, **kw):
    async with ScriptedServer(script) as srv:
        cfg = config(srv.url, workers=workers, **kw)
        run = BenchRun(cfg, run_id=run_id) if workers == 1 else WorkerRun(cfg, on_record, run_id)
        if on_record is not None and workers == 1:
            run.on_record = run.context.on_record = on_record  # type: ignore[union-attr]
        result = await run.run()
        return run, result, srv


def _workload(result) -> dict[str, tuple]:
    """What was asked of each request: its lengths asked, the prompt the server counted."""
    return {
        r.request_id: (r.index, r.prompt_tokens_requested, r.output_tokens_requested, r.prompt_tokens)
        for r in result.records
    }


def test_open_loop_with_two_workers_sends_the_single_process_workload_and_schedule():
    kw = dict(rate=300, arrival="poisson", requests=30, warmup=2)
    _, one, _ = asyncio.run(_run(FAST, 1, **kw))
    _, two, srv = asyncio.run(_run(FAST, 2, **kw))
    assert _workload(two) == _workload(one)  # same ids, lengths and salted prompts (server's count)
    assert len(_workload(one)) == 32 and set(srv.stats.truth) == set(_workload(one))
    assert {r.worker for r in two.records} == {0, 1}  # each record names the worker that measured it

    def offsets(result):
        t0 = min(r.scheduled_ns for r in result.records)  # request 0 is due at offset 0
        return {r.request_id: r.scheduled_ns - t0 for r in result.records}

    assert offsets(two) == offsets(one)  # the very arrival times of the single process
    assert two.conditions["workers"]["count"] == 2 and "workers" not in one.conditions


def test_closed_loop_with_two_workers_splits_the_users_and_sends_the_same_requests():
    kw = dict(concurrency=5, requests=25)
    _, one, _ = asyncio.run(_run(FAST, 1, **kw))
    _, two, _ = asyncio.run(_run(FAST, 2, **kw))
    assert _workload(two) == _workload(one)
    assert {r.worker for r in two.records} == set(range(5))  # users numbered across the workers
    per_worker = [w.requests for w in two.health.workers]
    assert sum(per_worker) == 25 and all(n > 0 for n in per_worker)


def test_merged_records_are_the_union_of_the_workers_and_health_covers_both():
    seen: list[str] = []
    run, result, srv = asyncio.run(_run(FAST, 2, on_record=lambda r: seen.append(r.request_id),
                                        rate=200, arrival="constant", requests=20))  # fmt: skip
    dealt = [set(run.planned_indices(w)) for w in range(2)]
    assert dealt[0].isdisjoint(dealt[1]) and dealt[0] | dealt[1] == set(range(20))
    assert sorted(r.index for r in result.records) == list(range(20))
    assert sorted(seen) == sorted(r.request_id for r in result.records)  # streamed as they ended
    assert set(srv.stats.truth) == {r.request_id for r in result.records}
    health = result.health
    assert [w.worker for w in health.workers] == [0, 1]
    assert all(w.report is not None and w.report.loop_lag_p99_ms is not None for w in health.workers)
    assert [w.requests for w in health.workers] == [10, 10]
    clock = result.conditions["workers"]["clock"]  # one machine: one clock, and the check says so
    assert [c["same_clock"] for c in clock["workers"]] == [True, True]
    assert all(
        c["error_ns"] >= 0 and abs(c["offset_ns"]) <= max(c["error_ns"], 1_000_000) for c in clock["workers"]
    )
    out = result.to_dict()
    assert len(out["summary"]["client"]["workers"]) == 2
    assert all(w["health"]["valid"] in (True, False) for w in out["summary"]["client"]["workers"])


def test_a_worker_killed_mid_run_leaves_every_sent_request_recorded_with_the_reason():
    slow = Script(ttft_s=0.05, itl_s=0.02)  # about 0.2 s a request: some are in flight when killed
    killed: list[int] = []
    holder: dict = {}

    def kill_worker_one(record) -> None:
        if not killed:
            pid = holder["run"].worker_pids[1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    async def go():
        async with ScriptedServer(slow) as srv:
            run = WorkerRun(config(srv.url, concurrency=4, requests=24, workers=2), kill_worker_one, "kill")
            holder["run"] = run
            return await run.run(), srv

    result, srv = asyncio.run(go())
    assert killed
    ids = [r.request_id for r in result.records]
    assert len(ids) == len(set(ids)) == 24  # every request dealt is a record, once
    assert set(srv.stats.truth) <= set(ids)  # every request the server saw is recorded
    lost = [r for r in result.records if r.error and "worker 1 died (killed by SIGKILL)" in r.error]
    assert lost and all(r.status is Status.CANCELLED for r in lost)
    assert any("in flight" in r.error for r in lost)  # it had requests out when it died
    assert any(r.error.startswith("not sent") for r in lost)  # and requests it never sent
    assert not result.valid and any("worker 1 died" in x for x in result.health.invalid_reasons)
    assert result.stop_reason.startswith("aborted: worker 1 died")
    assert result.health.workers[0].report is not None and result.health.workers[1].report is None


def test_workers_are_capped_by_users_and_auto_follows_the_rate():
    assert worker_count(config("http://x", concurrency=1, requests=1, workers=4)) == 1
    assert worker_count(config("http://x", rate=5, requests=1, workers="auto"), cores=2) == 1
    assert worker_count(config("http://x", rate=5000, requests=1, workers="auto"), cores=2) == 2


def test_bad_worker_settings_are_refused_before_any_load():
    with pytest.raises(ValueError, match="--workers"):
        config("http://x", concurrency=1, requests=1, workers=0).validate()


def test_ray_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr("tokenpace.app.workers.ray_workers.ray_installed", lambda: False)
    with pytest.raises(RayUnavailableError, match=r"pip install 'tokenpace\[ray\]'"):
        make_run(config("http://x", concurrency=1, requests=1, ray="auto"))


def test_an_open_loop_cap_is_split_between_the_workers():
    slow = Script(ttft_s=0.03, itl_s=0.002)
    _, result, _ = asyncio.run(_run(slow, 2, rate=400, arrival="constant", requests=24, max_concurrency=3))
    assert result.summary.counts["ok"] == 24
    events = sorted([(r.sent_ns, 1) for r in result.records] + [(r.end_ns, -1) for r in result.records])
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak <= 3  # 2 + 1: never the cap in each worker


def test_a_trace_replayed_by_two_workers_keeps_the_traces_clock():
    from tokenpace.app.run.workloads import WorkloadOptions
    from tokenpace.core.workload import TraceRow

    rows = [TraceRow(timestamp_s=i * 0.01, input_tokens=8 + i, output_tokens=4) for i in range(10)]
    kw = dict(rate=1.0, requests=None, duration_s=5.0, workload_opts=WorkloadOptions(trace=rows))
    _, one, _ = asyncio.run(_run(FAST, 1, **kw))
    _, two, _ = asyncio.run(_run(FAST, 2, **kw))

    def schedule(result):
        t0 = min(r.scheduled_ns for r in result.records)
        return sorted((r.request_id, r.scheduled_ns - t0, r.prompt_tokens_requested) for r in result.records)

    assert len(two.records) == 10 and schedule(two) == schedule(one)


def test_stop_reaches_every_worker_and_keeps_what_was_measured():
    slow = Script(ttft_s=0.02, itl_s=0.05)  # requests still streaming when the stop comes

    async def go():
        async with ScriptedServer(slow) as srv:
            run = WorkerRun(config(srv.url, concurrency=4, duration_s=30.0, workers=2), None, "stop")

            async def stop_mid_stream() -> None:  # as Ctrl-C does, once requests are streaming
                for _ in range(600):  # workers start slowly on a busy host: wait for traffic
                    if len(srv.stats.truth) >= 4:
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.1)
                run.stop()

            stopper = asyncio.get_running_loop().create_task(stop_mid_stream())
            result = await run.run()
            await stopper
            return result, srv

    result, srv = asyncio.run(go())
    assert result.interrupted and result.stop_reason == "interrupted by the user"
    assert set(srv.stats.truth) <= {r.request_id for r in result.records}
    cancelled = [r for r in result.records if r.status is Status.CANCELLED]
    assert cancelled and all(r.error == "cancelled by the user" for r in cancelled)
    assert all(w.report is not None for w in result.health.workers)  # both ended and reported
