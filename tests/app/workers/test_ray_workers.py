"""`--ray`: the same workers as Ray actors on a local Ray cluster started by the test (127.0.0.1,
small object store). Skipped where Ray (the optional extra) is not installed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.workers.run_factory import make_run
from tokenpace.core.record import Status
from tokenpace.testing.scripted_server import Script, ScriptedServer

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_cluster():
    ray.init(address="local", num_cpus=2, object_store_memory=80 * 1024 * 1024, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)  # fmt: skip
    yield
    ray.shutdown()


def _config(url: str, **kw: Any) -> BenchConfig:
    defaults = {"input_len": "16:48", "output_len": "4:8", "timeout_s": 10.0, "server_metrics": "off",
                "workers": 2, "ray": "auto"}  # fmt: skip
    return bench_config(url, **{**defaults, **kw})


def test_a_bench_through_ray_actors_sends_every_request_once_and_states_the_clock(local_cluster):
    async def go():
        async with ScriptedServer(Script(ttft_s=0.01, itl_s=0.002)) as srv:
            run = make_run(_config(srv.url, rate=100, arrival="constant", requests=24), run_id="ray")
            return run, await run.run(), srv

    run, result, srv = asyncio.run(go())
    assert type(run).__name__ == "RayWorkerRun"
    assert sorted(r.index for r in result.records) == list(range(24))
    assert set(srv.stats.truth) == {r.request_id for r in result.records}  # the union of the actors'
    assert [w.requests for w in result.health.workers] == [12, 12]
    workers = result.conditions["workers"]
    assert workers["kind"].startswith("Ray actors") and workers["count"] == 2
    clock = workers["clock"]
    assert "NTP-style" in clock["method"]
    assert all(c["same_clock"] and c["error_ns"] >= 0 for c in clock["workers"])


def test_an_actor_killed_mid_run_leaves_every_sent_request_recorded(local_cluster):
    killed: list[bool] = []
    holder: dict = {}

    def kill_actor_one(record) -> None:
        if not killed:
            holder["run"].links[1].process.kill()  # ray.kill: the actor's process ends at once
            killed.append(True)

    async def go():
        async with ScriptedServer(Script(ttft_s=0.05, itl_s=0.02)) as srv:
            run = make_run(_config(srv.url, concurrency=4, requests=16), kill_actor_one, "raykill")
            holder["run"] = run
            return await run.run(), srv

    result, srv = asyncio.run(go())
    ids = [r.request_id for r in result.records]
    assert killed and len(ids) == len(set(ids)) == 16
    assert set(srv.stats.truth) <= set(ids)
    lost = [r for r in result.records if r.error and "worker 1 died" in r.error]
    assert lost and all(r.status is Status.CANCELLED for r in lost)
    assert not result.valid
