"""bench with --gpu-metrics: a scripted dcgm-exporter's readings on the run's timeline and over its
steady window; auto, nvidia-smi and bad sources; the simulator's own gauges."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchRun
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.sim import SimServer
from tokenpace.testing.dcgm_exporter import DcgmExporter
from tokenpace.testing.scripted_server import Script, ScriptedServer

FAST = Script(ttft_s=0.01, itl_s=0.01)


async def _bench(url: str, gpu: str, **kw):
    cfg = bench_config(
        url,
        input_len="16",
        output_len="20",
        concurrency=2,
        requests=kw.pop("requests", 40),
        gpu_metrics=gpu,
        server_metrics=kw.pop("server_metrics", "off"),
        server_metrics_interval_s=0.1,
        stall_tolerance=1.0,
        **kw,
    )
    return await BenchRun(cfg).run()


def test_a_dcgm_exporter_is_read_beside_the_run_per_gpu_and_over_the_steady_window():
    async def go():
        with DcgmExporter(gpus=2, util=[20.0, 20.0, 80.0], spread=10.0) as exp:
            async with ScriptedServer(FAST) as srv:
                result = await _bench(srv.url, exp.url)
            return result, exp.pages

    result, pages = asyncio.run(go())
    gpu = result.to_dict()["gpu_metrics"]
    assert gpu["source"] == "given" and gpu["errors"] == 0 and gpu["scrapes"] + 1 == pages  # + the probe
    assert [g["gpu"] for g in gpu["gpus"]] == ["0", "1"]
    assert {g["model"] for g in gpu["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    # the probe and the first scrape (before any load) read 20 % and 30 %, every later one 80 % and 90 %
    mean = gpu["series"]["mean"]["util_pct"]
    assert mean[0][1] == 25.0 and {v for _, v in mean[1:]} == {85.0}
    assert mean[0][0] <= 0 < mean[1][0]  # on the run's timeline: the baseline before the first send
    steady = gpu["steady"]["util_pct"]
    assert steady["mean"] == 85.0 and steady["per_gpu"] == {"gpu-node-1/0": 80.0, "gpu-node-1/1": 90.0}
    assert gpu["steady"]["power_w"]["mean"] == pytest.approx(70 + 6 * 85)
    assert result.conditions["observers"]["gpu_metrics"] == gpu["url"]


def test_a_gpu_url_that_does_not_answer_refuses_the_run_before_any_load():
    async def go():
        async with ScriptedServer(FAST) as srv:
            bad = pytest.raises(PreflightError, match=r"--gpu-metrics: .* not Prometheus text")
            with DcgmExporter(hostile="garbage") as exp, bad:
                await _bench(srv.url, exp.url)
            return srv.stats.requests

    assert asyncio.run(go()) <= 1  # at most the model list: no load


def test_nvidia_smi_asked_for_and_absent_refuses_the_run_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))

    async def go():
        async with ScriptedServer(FAST) as srv:
            with pytest.raises(PreflightError, match="--gpu-metrics nvidia-smi: nvidia-smi is not on"):
                await _bench(srv.url, "nvidia-smi")

    asyncio.run(go())


def test_auto_is_quietly_off_without_a_source(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))

    async def go():
        async with ScriptedServer(FAST) as srv:
            return await _bench(srv.url, "auto", requests=4)

    result = asyncio.run(go())
    assert "gpu_metrics" not in result.to_dict()
    assert result.conditions["observers"]["gpu_metrics_source"].startswith("auto: none")


def test_auto_reads_a_local_nvidia_smi(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, GPU-abc, NVIDIA L4, 64, 20000, 61.5, 2040'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    async def go():
        async with ScriptedServer(FAST) as srv:
            return await _bench(srv.url, "auto", requests=20)

    gpu = asyncio.run(go()).to_dict()["gpu_metrics"]
    assert gpu["source"].startswith("auto: nvidia-smi") and gpu["url"] == "nvidia-smi"
    assert gpu["gpus"][0]["model"] == "NVIDIA L4"
    assert {v for _, v in gpu["series"]["mean"]["util_pct"]} == {64.0}


def test_the_simulator_exports_its_own_gauges_read_with_its_engine_metrics():
    async def go():
        async with SimServer() as srv:
            return await _bench(srv.url, "auto", server_metrics="auto", model=None)

    doc = asyncio.run(go()).to_dict()
    gpu = doc["gpu_metrics"]
    assert gpu["source"] == "auto: the engine's /metrics" and gpu["url"] == doc["server_metrics"]["url"]
    assert gpu["gpus"][0]["model"] == "NVIDIA H100 SXM 80GB"
    assert gpu["steady"]["util_pct"]["mean"] > 0  # the engine stepped while the load ran
    assert doc["server_metrics"]["steady"]["waiting"]["mean"] == 0.0  # two users: nothing queued
