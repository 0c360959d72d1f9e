"""Gateway TTFT beside the engine's own TTFT, from the simulated engine's vLLM-named /metrics."""

from __future__ import annotations

import asyncio

import aiohttp

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.engine_watch import ENGINE_TTFT, GATEWAY_TTFT, metrics_url
from tokenpace.sim import SimServer

CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "hello " * 200}],
    "max_tokens": 8,
    "stream": True,
}


def test_metrics_url_defaults_beside_the_api_root_or_is_given() -> None:
    assert metrics_url(parse_upstream("a=http://h:8000/v1")) == "http://h:8000/metrics"
    assert metrics_url(parse_upstream("a=http://h:8000/v1,metrics=http://h:9100/m")) == "http://h:9100/m"


def test_gateway_ttft_against_engine_ttft_per_upstream() -> None:
    async def main() -> tuple[dict, str, list[RequestRecord]]:
        records: list[RequestRecord] = []
        async with SimServer(port=0) as srv:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"sim={srv.url}"),),
                port=0,
                scrape_upstream_metrics=True,
                scrape_interval_s=0.1,
                scrape_window_s=60.0,
            )
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                engines = gw.gateway.engines
                assert engines is not None
                for _ in range(200):  # a first scrape before the load: the window's baseline
                    engines.refresh()
                    if engines.watched["sim"].scrapes:
                        break
                    await asyncio.sleep(0.05)

                async def one() -> None:
                    async with s.post(gw.url + "/v1/chat/completions", json=CHAT) as r:
                        assert r.status == 200
                        await r.read()

                await asyncio.gather(*(one() for _ in range(12)))
                view: dict = {}
                for _ in range(200):  # until a scrape after the last first token is in
                    async with s.get(gw.url + "/tokenpace/upstreams") as r:
                        view = (await r.json())["upstreams"]["sim"]
                    d = view.get("decomposition")
                    if d and d["requests"] == 12:
                        break
                    await asyncio.sleep(0.05)
                async with s.get(gw.url + "/metrics") as r:
                    prom = await r.text()
        return view, prom, records

    view, prom, records = asyncio.run(asyncio.wait_for(main(), 50))
    assert len(records) == 12
    assert view["engine"] == "vllm" and view["arm"] == "sim"
    d = view["decomposition"]
    assert d["requests"] == 12
    # The engine's TTFT is part of what the gateway waited for; the rest is network + proxy.
    assert 0 < d["engine_ttft_mean_ms"] <= d["client_ttft_mean_ms"]
    assert abs(d["network_and_client_ms"] - (d["client_ttft_mean_ms"] - d["engine_ttft_mean_ms"])) < 1e-9
    assert view["engine_latency_ms"]["ttft"]["n"] == 12
    assert f'{ENGINE_TTFT}{{upstream="sim"}}' in prom and f'{GATEWAY_TTFT}{{upstream="sim"}}' in prom


def test_upstreams_endpoint_without_scraping_says_how_to_enable_it() -> None:
    async def main() -> dict:
        async with SimServer(port=0) as srv:
            config = GatewayConfig(upstreams=(parse_upstream(f"sim={srv.url}"),), port=0)
            async with (
                RunningGateway(config) as gw,
                aiohttp.ClientSession() as s,
                s.get(gw.url + "/tokenpace/upstreams") as r,
            ):
                return await r.json()

    data = asyncio.run(asyncio.wait_for(main(), 30))
    assert "sim" in data["upstreams"] and "--scrape-upstream-metrics" in data["note"]
