"""The gateway on the one wire, against hostile wire behaviour, each beside a healthy stream that
stays ok: compression bombs, a request read and dropped on a kept-alive connection, and a body over
the limit announced with ``Expect: 100-continue``."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Awaitable, Callable

import aiohttp

from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.wire_upstream import STREAM, WireUpstream

PEAK_RSS_GROWTH_MB = 48  # a bomb inflated whole would add at least 64 MB (one read's output)
Body = Callable[[RunningGateway, aiohttp.ClientSession], Awaitable[list[object]]]


def with_upstream(body: Body, **cfg: object) -> tuple[list[object], list[RequestRecord], WireUpstream]:
    records: list[RequestRecord] = []

    async def main() -> tuple[list[object], WireUpstream]:
        async with WireUpstream() as up:
            upstreams = (parse_upstream(f"up={up.url}"),)
            config = GatewayConfig(upstreams=upstreams, port=0, **cfg)  # type: ignore[arg-type]
            gateway, session = (
                RunningGateway(config, on_record=records.append),
                aiohttp.ClientSession(auto_decompress=False),
            )
            async with gateway as gw, session as s:
                got = await body(gw, s)
            return got, up

    got, up = asyncio.run(asyncio.wait_for(main(), 30))
    return got, records, up


async def post(s: aiohttp.ClientSession, url: str, model: str, stream: bool = True) -> tuple[int, bytes]:
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with s.post(url + "/v1/chat/completions", json=chat) as r:
        return r.status, await r.read()


def by_model(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.labels["model"], []).append(r)
    return out


def test_compression_bombs_are_protocol_errors_forwarded_unchanged_beside_healthy_streams() -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> list[object]:
        return list(
            await asyncio.gather(
                post(s, gw.url, "bomb-sse"),
                post(s, gw.url, "bomb-json", stream=False),
                *(post(s, gw.url, "healthy") for _ in range(4)),
                post(s, gw.url, "gzip"),
            )
        )

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    got, records, _ = with_upstream(body)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    assert all(status == 200 for status, _ in got)  # type: ignore[misc,has-type]
    assert all(data == STREAM for _, data in got[2:6])  # type: ignore[misc,has-type]
    models = by_model(records)
    sse, json = models["bomb-sse"][0], models["bomb-json"][0]
    assert sse.status is Status.PROTOCOL_ERROR and sse.error == "compressed body inflates past 64 MiB"
    assert json.status is Status.PROTOCOL_ERROR and json.error == "compressed body inflates past 8 MiB"
    for ok in [*models["healthy"], *models["gzip"]]:  # a compressed stream is measured like a plain one
        assert ok.status is Status.OK, ok.error
        assert len(ok.token_ns) == 2
    assert grown < PEAK_RSS_GROWTH_MB


def test_a_post_the_upstream_read_on_a_kept_alive_connection_is_sent_once() -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> list[object]:
        got: list[object] = []
        for _ in range(3):
            got.append((await post(s, gw.url, "read-drop"))[0])
            await asyncio.sleep(0.05)  # past the pool's keep-alive look
        got.append((await post(s, gw.url, "healthy"))[0])
        return got

    got, records, up = with_upstream(body)
    assert got == [200, 502, 200, 200]
    assert up.read["read-drop"] == 3  # three POSTs, each read once: nothing sent twice
    dropped = by_model(records)["read-drop"][1]
    assert dropped.labels["outcome"] == "connect_error"
    assert "reused keep-alive connection" in (dropped.error or "") and "not resent" in (dropped.error or "")


def test_expect_100_continue_with_a_body_over_the_limit_gets_413_at_once() -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> list[object]:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (64 * 1024 * 1024)
        )  # and no body: a gateway that said 100 Continue would wait for it
        answer = await asyncio.wait_for(reader.read(65536), 5)
        writer.close()
        healthy = await post(s, gw.url, "healthy")  # beside it, traffic goes on
        return [answer, healthy]

    got, _, up = with_upstream(body, max_body_bytes=1024 * 1024)
    answer, healthy = got
    assert isinstance(answer, bytes) and answer.startswith(b"HTTP/1.1 413 ")
    assert b"100 Continue" not in answer
    assert healthy == (200, STREAM)
    assert sum(up.read.values()) == 1  # only the healthy request reached the upstream


def test_a_bomb_is_inflated_a_bounded_slice_per_call_never_whole_on_the_loop(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 38, class 2: an upstream bomb is inflated at most TURN_BYTES (+ one step) per call on
    the loop; the rest waits a turn (upstream reading paused), so healthy streams run between."""
    from gateway.inflate_probe import largest_slice
    from tokenpace.wire import inflate

    largest = largest_slice(monkeypatch)

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> list[object]:
        return list(await asyncio.gather(post(s, gw.url, "bomb-sse"), post(s, gw.url, "healthy")))

    got, records, _ = with_upstream(body)
    assert [status for status, _ in got] == [200, 200]  # type: ignore[misc,has-type]
    assert by_model(records)["bomb-sse"][0].error == "compressed body inflates past 64 MiB"
    assert 0 < largest[0] <= inflate.TURN_BYTES + inflate.STEP_BYTES


def test_a_compressed_request_body_is_refused_at_once_never_inflated() -> None:
    """Issue 38, class 2: 1 MB of gzip inflating to 1 GiB was inflated by aiohttp before --max-body
    applied (413 after seconds, the loop frozen); now it is never inflated: 415 at once."""
    from tokenpace.testing.wire_upstream import gzip_of_repeated

    bomb = gzip_of_repeated(b"\0" * 1024, 256 * 1024 * 1024)

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> list[object]:
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        async with s.post(gw.url + "/v1/chat/completions", data=bomb, headers=headers) as r:
            refused = (r.status, await r.read())
        return [refused, await post(s, gw.url, "healthy")]

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    got, _, _ = with_upstream(body, max_body_bytes=1024 * 1024)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    refused, after = got
    assert isinstance(refused, tuple) and isinstance(after, tuple)
    assert refused[0] == 415 and b"compressed request bodies are not accepted" in refused[1]
    assert after[0] == 200
    assert grown < PEAK_RSS_GROWTH_MB
