"""Stopping drains (serve.py): while a stream is still in flight after the stop began, the admin
pages answer: readiness 503 with the reason and the count, liveness 200; on one port a new proxied
request is refused 503 (the connection closed), with the admin pages apart the proxy's port is
closed; the stream in flight arrives whole."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.procs import free_port
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.mark.parametrize("apart", [False, True])
def test_the_admin_pages_answer_through_the_drain(apart: bool) -> None:
    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        # 40 chunks 50 ms apart: the stream is still in flight while the stop drains it
        async with ScriptedServer(Script(ttft_s=0.01, itl_s=0.05, tokens=40)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                admin_port=free_port() if apart else None,
                shutdown_timeout_s=60.0,
            )
            gw = RunningGateway(config)
            await gw.start()
            async with aiohttp.ClientSession() as s:
                streaming = await s.post(gw.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 40})
                assert streaming.status == 200
                await streaming.content.readline()  # under way
                stopping = asyncio.create_task(gw.stop())
                await asyncio.sleep(0.1)
                assert not stopping.done()
                async with aiohttp.ClientSession() as fresh:  # a new connection, as a kubelet's
                    async with fresh.get(gw.admin_url + "/tokenpace/ready") as r:
                        seen["ready"] = (r.status, await r.json())
                    async with fresh.get(gw.admin_url + "/tokenpace/live") as r:
                        seen["live"] = r.status
                    try:
                        async with fresh.post(gw.url + "/v1/chat/completions", json=CHAT) as r:
                            seen["new"] = (r.status, r.headers.get("Connection", ""), await r.text())
                    except aiohttp.ClientConnectorError:
                        seen["new"] = "refused"
                seen["body"] = await streaming.read()
                await stopping
        return seen

    seen = asyncio.run(main())
    assert seen["ready"] == (503, {"ready": False, "why": "draining: 1 requests in flight"})
    assert seen["live"] == 200
    if apart:
        assert seen["new"] == "refused"
    else:
        status, connection, text = seen["new"]
        assert status == 503 and connection.lower() == "close" and "stopping" in text
    assert seen["body"].rstrip().endswith(b"data: [DONE]")


def test_sigterm_to_a_gateway_process_keeps_its_probes_answering_through_the_drain(threaded_server) -> None:
    """The real signal to the real command: readiness says why, liveness holds, the stream ends whole."""
    import http.client
    import json
    import signal
    import time

    from tokenpace.testing.procs import start_service, wait_listening

    port = free_port()
    proc = start_service(
        "gateway", "--listen", f"127.0.0.1:{port}", "--upstream", f"a={threaded_server.url}", "--no-store"
    )
    try:
        wait_listening(port, proc)
        stream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({**CHAT, "max_tokens": 1500})  # 2 ms a token: 3 s of stream
        stream.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        answer = stream.getresponse()
        first = answer.readline()
        proc.send_signal(signal.SIGTERM)
        probes = []
        deadline = time.monotonic() + 30  # until the signal is handled (how long is not asserted)
        for path in ("/tokenpace/ready", "/tokenpace/live"):
            while time.monotonic() < deadline:
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                probe.request("GET", path)
                got = probe.getresponse()
                text = got.read().decode()
                if path.endswith("live") or got.status == 503:
                    probes.append((got.status, text))
                    break
        rest = answer.read()
    finally:
        proc.wait(timeout=60)
    assert len(probes) == 2, probes
    assert probes[0][0] == 503 and '"why":"draining: 1 requests in flight"' in probes[0][1]
    assert probes[1][0] == 200
    assert first and (first + rest).rstrip().endswith(b"data: [DONE]")
    assert proc.returncode == 0
