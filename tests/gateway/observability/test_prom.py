"""A real Prometheus scrapes the gateway; its histogram_quantile of TTFT agrees with the records."""

from __future__ import annotations

import asyncio
import bisect
import shutil
import subprocess
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from tokenpace.core.metrics import Slo, ttft_ns
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.procs import free_port
from tokenpace.testing.scripted_server import Script, ScriptedServer

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="Debian 'prometheus' not installed (make test installs it via scripts/system-deps.sh)",
)
TTFTS_S = [0.01 * (i + 1) for i in range(30)]  # one scripted model per TTFT: 10 ms .. 300 ms


async def _query(session: aiohttp.ClientSession, base: str, expr: str) -> float | None:
    async with session.get(f"{base}/api/v1/query", params={"query": expr}) as r:
        result = (await r.json())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_promql_p95_ttft_matches_records(tmp_path: Path) -> None:
    async def main() -> None:
        records: list[RequestRecord] = []
        scripts = {f"t{i}": Script(ttft_s=t, itl_s=0.002, tokens=3) for i, t in enumerate(TTFTS_S)}
        async with ScriptedServer(Script(), scripts=scripts) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0, slo=Slo(ttft_ms=100))
            async with RunningGateway(config, on_record=records.append) as gw:
                prom_port = free_port()
                cfg = tmp_path / "prometheus.yml"
                cfg.write_text(
                    "global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: gw\n"
                    f"    static_configs: [{{targets: ['127.0.0.1:{gw.port}']}}]\n"
                )
                proc = subprocess.Popen(
                    [str(PROMETHEUS), f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                try:
                    await _traffic_and_check(gw, records, f"http://127.0.0.1:{prom_port}", config)
                finally:
                    proc.terminate()
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()

    asyncio.run(asyncio.wait_for(main(), 50))


async def _traffic_and_check(gw: RunningGateway, records: list[RequestRecord], base: str, config) -> None:
    async with aiohttp.ClientSession() as s:

        async def one(model: str) -> None:
            body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}
            async with s.post(gw.url + "/v1/chat/completions", json=body) as r:
                await r.read()

        await asyncio.gather(*(one(f"t{i}") for i in range(len(TTFTS_S)) for _ in range(2)))
        n = len(records)
        assert n == 2 * len(TTFTS_S)
        count = None
        for _ in range(200):  # Prometheus starts, then scrapes every second
            try:
                count = await _query(s, base, "sum(gen_ai_server_time_to_first_token_seconds_count)")
            except aiohttp.ClientError:
                count = None
            if count == n:
                break
            await asyncio.sleep(0.1)
        assert count == n, f"Prometheus saw {count} of {n} requests"
        p95 = await _query(
            s,
            base,
            "histogram_quantile(0.95, sum by (le) (gen_ai_server_time_to_first_token_seconds_bucket))",
        )
        within = await _query(
            s, base,
            'sum(gen_ai_server_time_to_first_token_seconds_bucket{le="0.1"}) / '
            "sum(gen_ai_server_time_to_first_token_seconds_count)",
        )  # fmt: skip
    ttfts = np.array([ttft_ns(r) for r in records]) / 1e9
    bounds = gw.gateway.metrics.ttft_buckets
    lo_v, hi_v = np.percentile(ttfts, 95, method="lower"), np.percentile(ttfts, 95, method="higher")
    lo = bounds[bisect.bisect_left(bounds, lo_v) - 1]  # the bucket(s) holding the records' P95
    hi = bounds[bisect.bisect_left(bounds, hi_v)]
    assert p95 is not None and lo <= p95 <= hi, (p95, lo_v, hi_v, lo, hi)
    # the SLO threshold is a bucket bound: the share within it is exact, not interpolated
    assert within == pytest.approx(float(np.mean(ttfts <= 0.1)))
