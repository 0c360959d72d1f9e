"""The Realtime WebSocket through the gateway: the upgrade passed on, messages relayed both ways
unchanged, a record per response timed from the first text delta, closes and size bounds passed on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.core.metrics import ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.workload.lengths import parse_length
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.request_path import ws_proxy
from tokenpace.sim import SimServer
from tokenpace.wire.dialects.base import Sampling

CREATE = {
    "type": "response.create",
    "response": {"conversation": "none", "max_output_tokens": 5, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}
    ]},
}  # fmt: skip


async def gateway_in_front_of(url: str, fn: Callable[[RunningGateway], Awaitable[Any]]) -> tuple[Any, list]:
    records: list[RequestRecord] = []
    config = GatewayConfig(upstreams=(parse_upstream(f"up={url}"),), port=0)
    async with RunningGateway(config, on_record=records.append) as gw:
        return await fn(gw), records


def ws_of(gw: RunningGateway) -> str:
    return gw.url.replace("http://", "ws://") + "/v1/realtime?model=m"


def test_a_session_with_the_sim_is_relayed_and_each_response_measured():
    async def go(gw: RunningGateway) -> tuple[list[dict], str]:
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_of(gw), headers={"x-request-id": "c7"}) as ws,
        ):
            events = [orjson.loads((await ws.receive()).data)]  # session.created
            for _ in range(2):
                await ws.send_str(orjson.dumps(CREATE).decode())
                while events[-1]["type"] != "response.done":
                    events.append(orjson.loads((await ws.receive()).data))
                events.append({"type": "-"})
            async with s.get(gw.url + "/metrics") as r:
                return events, await r.text()

    async def main() -> tuple[Any, list]:
        async with SimServer(port=0) as srv:
            return await gateway_in_front_of(srv.url, go)

    (events, prom), records = asyncio.run(asyncio.wait_for(main(), 30))
    assert events[0]["type"] == "session.created"
    assert sum(e["type"] == "response.output_text.delta" for e in events) == 10
    assert [r.labels["client_request_id"] for r in records] == ["c7-1", "c7-2"]  # the client's id, kept apart
    for rec in records:
        assert rec.labels["api"] == "realtime" and rec.status is Status.OK and rec.http_status == 101
        assert rec.labels["model"] == "m" and rec.output_tokens_server == 5 and rec.prompt_tokens
        assert rec.first_token_ns == rec.first_answer_ns and ttft_ns(rec) > 0  # type: ignore[operator]
        assert len(rec.token_ns) == 5 and rec.finish_reason == "max_output_tokens"
    assert (
        'tokenpace_gateway_requests_total{api="realtime",arm="up",model="m",outcome="ok",upstream="up"} 2.0'
        in prom
    )


def test_bench_realtime_through_the_gateway_matches_its_records():
    async def go(gw: RunningGateway) -> Any:
        cfg = BenchConfig(
            url=gw.url + "/v1",
            api="realtime",
            model="m",
            input_len=parse_length("16"),
            output_len=parse_length("6"),
            timeout_s=20.0,
            concurrency=2,
            requests=4,
            sampling=Sampling(ignore_eos=True),
            server_metrics="off",
        )
        return await BenchRun(cfg).run()

    async def main() -> tuple[Any, list]:
        async with SimServer(port=0) as srv:
            return await gateway_in_front_of(srv.url, go)

    result, records = asyncio.run(asyncio.wait_for(main(), 40))
    client = [r for r in result.records if r.status is Status.OK]
    assert len(client) == len(records) == 4 and all(r.status is Status.OK for r in records)
    assert sorted(r.output_tokens for r in records) == sorted(r.output_tokens for r in client) == [6] * 4


class EchoUpstream:
    """A WebSocket upstream that echoes each message back with its opcode, and closes on "bye"."""

    def __init__(self, close_code: int = 4001) -> None:
        self.close_code = close_code
        self.seen: list[tuple[aiohttp.WSMsgType, Any]] = []
        self.closed_by_peer: asyncio.Event | None = None
        app = web.Application()
        app.router.add_get("/v1/realtime", self.handle)
        self.runner = web.AppRunner(app)
        self.url = ""

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False, protocols=("realtime",))
        await ws.prepare(request)
        while True:
            msg = await ws.receive()
            if msg.type is aiohttp.WSMsgType.CLOSE:  # the code the peer sent
                self.seen.append((msg.type, msg.data))
                break
            if msg.type in (aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                self.seen.append((aiohttp.WSMsgType.CLOSE, ws.close_code))
                break
            self.seen.append((msg.type, msg.data))
            if msg.type is aiohttp.WSMsgType.TEXT and msg.data == "bye":
                await ws.close(code=self.close_code, message=b"done here")
            elif msg.type is aiohttp.WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type is aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
            elif msg.type is aiohttp.WSMsgType.PING:
                await ws.pong(msg.data)
        return ws

    async def __aenter__(self) -> EchoUpstream:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


def with_echo(fn: Callable[[RunningGateway, EchoUpstream], Awaitable[Any]]) -> tuple[Any, list, EchoUpstream]:
    async def main() -> tuple[Any, list, EchoUpstream]:
        async with EchoUpstream() as up:
            out, records = await gateway_in_front_of(up.url, lambda gw: fn(gw, up))
            return out, records, up

    return asyncio.run(asyncio.wait_for(main(), 30))


def test_messages_relay_unchanged_both_ways_and_an_upstream_close_reaches_the_client():
    text = '{"type":"x","text":"héllo \\u00e9"}  '  # odd spacing and escapes survive as they are
    blob = bytes(range(256)) * 300

    async def go(gw: RunningGateway, up: EchoUpstream) -> tuple:
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_of(gw), autoping=False, protocols=("realtime",)) as ws,
        ):
            await ws.send_str(text)
            got_text = await ws.receive()
            await ws.send_bytes(blob)
            got_blob = await ws.receive()
            await ws.ping(b"are you there")
            pong = await ws.receive()
            await ws.send_str("bye")
            closed = await ws.receive()
            return ws.protocol, got_text, got_blob, pong, closed, ws.close_code

    (protocol, got_text, got_blob, pong, closed, code), records, up = with_echo(go)
    assert protocol == "realtime"  # the subprotocol the upstream chose
    assert got_text.data == text and got_blob.data == blob and pong.type is aiohttp.WSMsgType.PONG
    assert pong.data == b"are you there"
    assert closed.type is aiohttp.WSMsgType.CLOSE and code == 4001 and closed.extra == "done here"
    assert [t for t, _ in up.seen[:3]] == [
        aiohttp.WSMsgType.TEXT,
        aiohttp.WSMsgType.BINARY,
        aiohttp.WSMsgType.PING,
    ]
    assert records == []  # no response.create: nothing to measure


def test_a_client_close_reaches_the_upstream_and_ends_an_open_response():
    async def go(gw: RunningGateway, up: EchoUpstream) -> None:
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
            await ws.send_str(orjson.dumps(CREATE).decode())  # echoed back: never a response.created
            await ws.receive()
            await ws.close(code=4002)
        for _ in range(100):
            if up.seen and up.seen[-1][0] is aiohttp.WSMsgType.CLOSE:
                return
            await asyncio.sleep(0.02)

    _, records, up = with_echo(go)
    assert up.seen[-1] == (aiohttp.WSMsgType.CLOSE, 4002)
    (rec,) = records
    assert rec.labels["outcome"] == "client_disconnect" and rec.status is Status.CANCELLED


def test_a_message_over_the_bound_closes_both_sides_with_1009(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(ws_proxy, "MAX_MESSAGE", 1024)

    async def go(gw: RunningGateway, up: EchoUpstream) -> int | None:
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
            await ws.send_bytes(b"x" * 2048)
            msg = await ws.receive()
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            for _ in range(100):
                if up.seen and up.seen[-1][0] is aiohttp.WSMsgType.CLOSE:
                    break
                await asyncio.sleep(0.02)
            return ws.close_code

    code, _, up = with_echo(go)
    assert code == 1009 and up.seen == [(aiohttp.WSMsgType.CLOSE, 1009)]  # never relayed


def test_a_refused_upgrade_reaches_the_client_with_its_status_and_is_recorded():
    async def go(gw: RunningGateway, up: EchoUpstream) -> int:
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await s.ws_connect(gw.url.replace("http://", "ws://") + "/v1/nowhere/realtime")
            return info.value.status

    status, records, _ = with_echo(go)
    assert status == 404
    (rec,) = records
    assert (
        rec.labels["api"] == "realtime" and rec.labels["outcome"] == "http_error" and rec.http_status == 404
    )


class FloodUpstream(EchoUpstream):
    """Sends ``count`` binary messages of 1 MiB as fast as the socket takes them, counting them."""

    count = 64

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        for i in range(self.count):
            await ws.send_bytes(bytes([i]) * (1 << 20))
            self.sent = i + 1
        await ws.close()
        return ws


def test_a_client_that_does_not_read_holds_the_upstream_back():
    async def go(gw: RunningGateway, up: FloodUpstream) -> tuple[int, list[int]]:
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw), max_msg_size=2 << 20) as ws:
            last, still = -1, 0
            while still < 5:  # until the upstream's progress stops (the socket buffers are full)
                await asyncio.sleep(0.1)
                last, still = up.sent, (still + 1 if up.sent == last else 0)
            firsts: list[int] = []
            while len(firsts) < up.count:
                msg = await ws.receive()
                assert msg.type is aiohttp.WSMsgType.BINARY and len(msg.data) == 1 << 20
                firsts.append(msg.data[0])
            return last, firsts

    async def main() -> tuple[Any, list]:
        async with FloodUpstream() as up:
            return await gateway_in_front_of(up.url, lambda gw: go(gw, up))  # type: ignore[arg-type]

    (held_at, firsts), _ = asyncio.run(asyncio.wait_for(main(), 60))
    assert held_at < FloodUpstream.count  # held back, not buffered whole in the gateway
    assert firsts == list(range(FloodUpstream.count))  # then everything, in order, once


def test_an_upstream_that_never_answers_the_upgrade_gets_a_502_after_the_connect_timeout():
    async def main() -> tuple[int, list]:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65536)  # the upgrade request, never answered
            await asyncio.sleep(30)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        records: list[RequestRecord] = []
        upstream = parse_upstream(f"up=http://127.0.0.1:{port}/v1")
        config = GatewayConfig(upstreams=(upstream,), port=0, connect_timeout_s=0.3)
        async with server, RunningGateway(config, on_record=records.append) as gw:
            async with aiohttp.ClientSession() as s:
                with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                    await s.ws_connect(ws_of(gw))
            return info.value.status, records

    status, records = asyncio.run(asyncio.wait_for(main(), 20))
    (rec,) = records
    assert status == 502 and rec.labels["outcome"] == "connect_error"


def test_a_bug_of_ours_mid_session_ends_its_open_responses_as_internal_error(monkeypatch: pytest.MonkeyPatch):
    class Faulty(ws_proxy.ClientWebSocket):  # the gateway's side towards the client only
        async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
            raise RuntimeError("injected fault")

    monkeypatch.setattr(ws_proxy, "ClientWebSocket", Faulty)

    async def go(gw: RunningGateway, up: EchoUpstream) -> int | None:
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
            await ws.send_str(orjson.dumps(CREATE).decode())  # a response opened (echoed back)
            await ws.receive()
            await ws.send_bytes(b"echoed: relaying it back fails")
            msg = await ws.receive()
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return ws.close_code

    code, records, _ = with_echo(go)
    assert code == 1011
    (rec,) = records
    assert rec.labels["outcome"] == "internal_error" and rec.error == "internal error (RuntimeError)"


async def _raw_ws(gw: RunningGateway, frames: bytes) -> bytes:
    """A hand-made client: the upgrade, then ``frames`` as given; what came back until the close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    writer.write(
        b"GET /v1/realtime?model=m HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    writer.write(frames)
    got = b""
    with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), 5):
            got += chunk
    writer.close()
    return got


def _masked(payload: bytes, opcode: int = 0x1) -> bytes:
    mask, n = b"\x01\x02\x03\x04", len(payload)
    size = bytes((0x80 | n,)) if n < 126 else bytes((0x80 | 126,)) + n.to_bytes(2, "big")
    return bytes((0x80 | opcode,)) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_an_unmasked_frame_from_a_client_closes_the_session_with_1002_and_is_not_relayed():
    """Issue 38, edge: an unmasked WebSocket frame from a client was relayed instead of closed 1002."""

    async def go(gw: RunningGateway, up: EchoUpstream) -> bytes:
        # one masked message, then an unmasked one (RFC 6455 5.1: the server must close)
        return await _raw_ws(gw, _masked(b"first") + b"\x81\x06second")

    got, _, up = with_echo(go)
    texts = [d for t, d in up.seen if t is aiohttp.WSMsgType.TEXT]
    assert texts == ["first"]  # the masked one went through, the unmasked one never did
    assert b"\x88\x02\x03\xea" in got  # a close frame with code 1002 reached the client


def test_mask_watch_finds_the_unmasked_frame_however_the_bytes_are_cut():
    from tokenpace.wire.websocket import MaskWatch

    stream = _masked(b"a" * 200) + _masked(b"") + _masked(b"c" * 130) + b"\x81\x03bad"
    for size in (1, 2, 3, 7, 64, len(stream)):
        watch, passed, bad = MaskWatch(), b"", False
        for i in range(0, len(stream), size):
            ok, bad = watch.scan(stream[i : i + size])
            passed += ok
            if bad:
                break
        assert bad and passed == stream[: len(stream) - 5], size


class _RawWsUpstream:
    """Completes the upgrade, then sends ``frames`` as they are (hostile ones) and waits; with
    ``after_client``, only once the client's first bytes have come."""

    def __init__(self, frames: bytes, after_client: bool = False) -> None:
        self.frames = frames
        self.after_client = after_client

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import base64
        import hashlib

        head = await reader.readuntil(b"\r\n\r\n")
        key = next(
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + (b"" if self.after_client else self.frames)
        )
        if self.after_client:
            await reader.read(1)
            writer.write(self.frames)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(), 5)
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


@pytest.mark.parametrize(
    ("frames", "codes"),
    [
        (b"\x83\x01x", {1002}),  # a reserved opcode
        (b"\x81\x02\xff\xfe", {1007}),  # text that is not UTF-8
        (b"\x81\x7f" + (2**62).to_bytes(8, "big"), {1009}),  # a length claim of 2^62 bytes
        (b"\x01\x01a\x81\x01b", {1002}),  # a new message inside a fragmented one
        (b"\x89\x7e\x00\x80" + b"p" * 128, {1002}),  # a control frame over 125 bytes
    ],
)
def test_hostile_frames_from_a_websocket_upstream_close_the_client_with_a_protocol_code(
    frames: bytes, codes: set[int]
) -> None:
    """Issue 38, edge: hostile frames from a WebSocket upstream end the session with the protocol's
    code (never 1011, an internal error of ours), and no record says internal_error."""

    async def main() -> tuple[int | None, list]:
        async with _RawWsUpstream(frames) as url:

            async def go(gw: RunningGateway) -> int | None:
                async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
                    await ws.send_str(orjson.dumps(CREATE).decode())
                    with contextlib.suppress(asyncio.TimeoutError):
                        while (await asyncio.wait_for(ws.receive(), 5)).type not in (
                            aiohttp.WSMsgType.CLOSE,
                            aiohttp.WSMsgType.CLOSED,
                            aiohttp.WSMsgType.ERROR,
                        ):
                            pass
                    return ws.close_code

            return await gateway_in_front_of(url, go)

    code, records = asyncio.run(asyncio.wait_for(main(), 30))
    assert code in codes
    assert all(r.labels["outcome"] != "internal_error" for r in records)


def test_a_masked_frame_from_a_websocket_upstream_closes_the_client_with_1002_and_is_recorded() -> None:
    """Issue 38: a server must not mask (RFC 6455 5.1); an upstream's masked frame was relayed. Now
    the frames before it pass, it is not relayed, the client gets 1002 and the open response is a
    protocol error saying why."""
    good = b'{"type":"session.updated"}'
    frames = bytes((0x81, len(good))) + good + _masked(b'{"type":"response.created"}')

    async def main() -> tuple[tuple[int | None, list[str]], list]:
        async with _RawWsUpstream(frames, after_client=True) as url:

            async def go(gw: RunningGateway) -> tuple[int | None, list[str]]:
                texts: list[str] = []
                async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
                    await ws.send_str(orjson.dumps(CREATE).decode())
                    with contextlib.suppress(asyncio.TimeoutError):
                        while (msg := await asyncio.wait_for(ws.receive(), 5)).type is aiohttp.WSMsgType.TEXT:
                            texts.append(msg.data)
                        if msg.type is aiohttp.WSMsgType.CLOSE:
                            return msg.data, texts  # the code the gateway closed with
                    return None, texts

            return await gateway_in_front_of(url, go)

    (code, texts), records = asyncio.run(asyncio.wait_for(main(), 30))
    assert code == 1002
    assert texts == [good.decode()]  # the unmasked frame went through, the masked one never did
    (rec,) = records
    assert rec.status is Status.PROTOCOL_ERROR and rec.labels["outcome"] == "protocol_error"
    assert rec.error == ws_proxy.MASKED_BY_UPSTREAM


def test_mask_watch_of_a_server_finds_the_masked_frame_however_the_bytes_are_cut() -> None:
    from tokenpace.wire.websocket import MaskWatch

    plain = b"\x81\x7e\x00\xc8" + b"a" * 200 + b"\x89\x00" + b"\x82\x03abc"
    stream = plain + _masked(b"bad")
    for size in (1, 2, 3, 7, 64, len(stream)):
        watch, passed, bad = MaskWatch(from_client=False), b"", False
        for i in range(0, len(stream), size):
            ok, bad = watch.scan(stream[i : i + size])
            passed += ok
            if bad:
                break
        assert bad and passed == plain, size
