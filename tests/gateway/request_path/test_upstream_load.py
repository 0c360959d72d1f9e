"""Each record says how many requests were in flight on its upstream when it was sent there (the
load ``tokenpace arms`` matches arms on): counted per upstream, this request not included, back to
0 once they end. Upstreams on 127.0.0.1 that hold each answer until told to go."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from gateway.request_path.test_gateway import FULL_BODY, run
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.request_path.router import UpstreamLoad


class HeldUpstream:
    """Answers once ``go`` is set; ``arrived`` counts the requests that reached it."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.arrived = 0
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.arrived += 1
        await self.go.wait()
        return web.Response(body=FULL_BODY, content_type="application/json")

    async def __aenter__(self) -> HeldUpstream:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


def _body(model: str) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_concurrent_requests_see_the_load_their_upstream_carried_at_dispatch() -> None:
    async def main() -> None:
        async with HeldUpstream() as a, HeldUpstream() as b:
            records: list[RequestRecord] = []
            upstreams = (parse_upstream(f"a={a.url},model=ma"), parse_upstream(f"b={b.url},model=mb"))
            config = GatewayConfig(upstreams=upstreams, port=0)
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                url = gw.url + "/v1/chat/completions"

                async def post(model: str) -> None:
                    async with s.post(url, json=_body(model)) as r:
                        assert r.status == 200 and await r.read() == FULL_BODY

                first = asyncio.create_task(post("ma"))
                await _until(lambda: a.arrived == 1, "the first request reached a")
                second = asyncio.create_task(post("ma"))  # a carries one already
                other = asyncio.create_task(post("mb"))  # b carries none: counted per upstream
                await _until(lambda: a.arrived == 2 and b.arrived == 1, "all three reached their upstream")
                assert gw.gateway.load.counts == {"a": 2, "b": 1}
                a.go.set()
                b.go.set()
                await asyncio.gather(first, second, other)
                await post("ma")  # after they ended: a carries nothing again
                assert gw.gateway.load.counts == {}
            loads = [(r.labels["upstream"], r.upstream_inflight) for r in records]
            assert sorted(loads[:3]) == [("a", 0), ("a", 1), ("b", 0)] and loads[3] == ("a", 0)

    run(main())


def test_the_count_is_per_upstream_and_forgets_idle_ones() -> None:
    load = UpstreamLoad()
    assert [load.enter("a"), load.enter("a"), load.enter("b"), load.enter("a")] == [0, 1, 0, 2]
    load.leave("a")
    load.leave("b")
    assert load.counts == {"a": 2} and load.enter("a") == 2
    for _ in range(3):
        load.leave("a")
    load.leave("a")  # a stray leave never goes negative nor keeps an entry
    assert load.counts == {}
