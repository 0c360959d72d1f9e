"""The gateway's engine watch with gpu_metrics= per upstream: a scripted dcgm-exporter and the
simulator's own gauges as Prometheus series, the GPU panel and the capacity warning built on them."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tokenpace.core.metrics import Slo
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.engine_watch import ENGINE_WAITING, GPU_POWER, GPU_UTIL
from tokenpace.gateway.observability.grafana import dashboard
from tokenpace.gateway.observability.rules import alert_rules
from tokenpace.sim import SimServer
from tokenpace.testing.dcgm_exporter import DcgmExporter


def test_gpu_metrics_is_an_upstream_option_a_url_or_nvidia_smi():
    assert parse_upstream("a=http://h:8000/v1,gpu_metrics=http://h:9400/metrics").gpu_metrics == (
        "http://h:9400/metrics"
    )
    assert parse_upstream("a=http://h:8000/v1,gpu_metrics=nvidia-smi").gpu_metrics == "nvidia-smi"
    assert parse_upstream("a=http://h:8000/v1").gpu_metrics is None
    with pytest.raises(ValueError, match=r"gpu_metrics=\.\.\. is neither"):
        parse_upstream("a=http://h:8000/v1,gpu_metrics=dcgm:9400")


def test_each_upstreams_gpus_and_queue_are_exported_as_series():
    async def main() -> tuple[str, dict]:
        with DcgmExporter(gpus=2, util=[80.0], spread=10.0) as exp:
            async with SimServer(port=0) as sim_a, SimServer(port=0) as sim_b:
                own = sim_b.url[: -len("/v1")] + "/metrics"  # the simulator's DCGM gauges, its engine's page
                config = GatewayConfig(
                    upstreams=(
                        parse_upstream(f"a={sim_a.url},gpu_metrics={exp.url}"),
                        parse_upstream(f"b={sim_b.url},gpu_metrics={own}"),
                    ),
                    port=0,
                    scrape_upstream_metrics=True,
                    scrape_interval_s=0.1,
                )
                async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                    view: dict = {}
                    for _ in range(200):
                        async with s.get(gw.url + "/tokenpace/upstreams") as r:
                            view = (await r.json())["upstreams"]
                        if all((view[n].get("gpu") or {}).get("per_gpu") for n in ("a", "b")):
                            break
                        await asyncio.sleep(0.05)
                    async with s.get(gw.url + "/metrics") as r:
                        return await r.text(), view

    prom, view = asyncio.run(asyncio.wait_for(main(), 50))
    assert f'{GPU_UTIL}{{gpu="gpu-node-1/0",upstream="a"}} 80.0' in prom
    assert f'{GPU_UTIL}{{gpu="gpu-node-1/1",upstream="a"}} 90.0' in prom
    assert f'{GPU_POWER}{{gpu="gpu-node-1/1",upstream="a"}} {70 + 6 * 90:.1f}' in prom
    assert f'{GPU_UTIL}{{gpu="tokenpace-sim/0",upstream="b"}}' in prom  # read from the engine's page
    assert f'{ENGINE_WAITING}{{upstream="a"}} 0.0' in prom
    assert view["a"]["gpu"]["mean"]["util_pct"] == 85.0
    assert view["b"]["gpu"]["gpus"][0]["model"] == "NVIDIA H100 SXM 80GB"


def test_the_capacity_warning_is_utilisation_past_70_while_waiting_rises():
    rule = next(
        r for r in alert_rules(Slo())["groups"][0]["rules"] if r["alert"] == "TokenpaceUpstreamNearCapacity"
    )
    assert f"avg by (upstream) (avg_over_time({GPU_UTIL}[10m])) > 70" in rule["expr"]
    assert f"and on (upstream) deriv({ENGINE_WAITING}[10m]) > 0" in rule["expr"]
    panel = dashboard(Slo())["panels"][-1]
    assert [t["expr"] for t in panel["targets"]] == [f"avg by (upstream) ({GPU_UTIL})", ENGINE_WAITING]
    assert panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 70.0
    ids = [p["id"] for p in dashboard(Slo(ttft_ms=500))["panels"]]
    assert len(ids) == len(set(ids))  # the GPU panel takes an id of its own
