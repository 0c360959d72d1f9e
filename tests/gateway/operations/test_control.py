"""The operator's pages: liveness always, readiness once the upstreams answered and never while
draining, the running config behind the keys, a change refused without any key."""

from __future__ import annotations

import asyncio

import aiohttp

from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.procs import free_port
from tokenpace.testing.scripted_server import Script, ScriptedServer


async def _get(s: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    async with s.get(url) as r:
        return r.status, await r.json()


def test_ready_once_upstreams_answer_and_not_while_draining() -> None:
    async def main() -> None:
        late = free_port()  # nothing listens there yet
        up = ScriptedServer(Script(ttft_s=0.001, itl_s=0.001))
        await up.start()
        ups = (parse_upstream(f"a={up.url}"), parse_upstream(f"b=http://127.0.0.1:{late}/v1"))
        gw = RunningGateway(GatewayConfig(upstreams=ups, port=0))
        await gw.start()
        try:
            async with aiohttp.ClientSession() as s:
                assert await _get(s, gw.url + "/tokenpace/live") == (200, {"live": True})
                for _ in range(100):  # a answers at once; b does not while nothing listens
                    status, body = await _get(s, gw.url + "/tokenpace/ready")
                    if body.get("why", "").endswith(": b"):
                        break
                    await asyncio.sleep(0.05)
                assert status == 503 and body == {
                    "ready": False,
                    "why": "waiting for upstream(s) to answer: b",
                }
                b = ScriptedServer(Script(), port=late)
                await b.start()
                try:
                    for _ in range(200):  # the probe tries again every PROBE_EVERY_S
                        status, body = await _get(s, gw.url + "/tokenpace/ready")
                        if status == 200:
                            break
                        await asyncio.sleep(0.05)
                    assert (status, body) == (200, {"ready": True})
                    gw.gateway.control.readiness.draining = True  # what stop() sets first
                    status, body = await _get(s, gw.url + "/tokenpace/ready")
                    assert status == 503 and body["why"].startswith("draining")
                    async with s.post(gw.url + "/tokenpace/config") as r:  # no key configured: never
                        assert r.status == 403 and "--admin-key" in await r.text()
                finally:
                    await b.stop()
        finally:
            await gw.stop()
            await up.stop()

    asyncio.run(main())
