"""The fuzzer extended to the WebSocket relay, both directions (issue 49): hypothesis draws a run of
frames (text, binary, ping, pong; empty to 70,000 bytes) and an ending (a clean close, a frame
breaking the masking rule, a reserved opcode, a control frame over 125 bytes), sent raw by one side
through the gateway. Asserted: every frame before the ending reaches the other side unchanged and
in order, a broken ending closes the session with 1002 and is blamed on the side that sent it, and
no record says internal_error."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import orjson
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gateway.request_path.test_ws_proxy import (  # noqa: E402
    CREATE,
    EchoUpstream,
    _RawWsUpstream,
    gateway_in_front_of,
    ws_of,
)
from tokenpace.gateway.lifecycle.serve import RunningGateway  # noqa: E402

SHORT = settings(
    max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
T = aiohttp.WSMsgType
OPCODES = {T.TEXT: 0x1, T.BINARY: 0x2, T.PING: 0x9, T.PONG: 0xA}
frames = st.lists(
    st.tuples(st.sampled_from(list(OPCODES)), st.sampled_from([0, 1, 125, 126, 300, 70_000])),
    max_size=6,
).map(lambda fs: [(t, min(n, 125) if t in (T.PING, T.PONG) else n) for t, n in fs])
endings = st.sampled_from(["close", "mask", "reserved", "big-control"])


def _frame(opcode: int, payload: bytes, masked: bool) -> bytes:
    n = len(payload)
    bit = 0x80 if masked else 0
    if n < 126:
        size = bytes((bit | n,))
    elif n < 65536:
        size = bytes((bit | 126,)) + n.to_bytes(2, "big")
    else:
        size = bytes((bit | 127,)) + n.to_bytes(8, "big")
    if not masked:
        return bytes((0x80 | opcode,)) + size + payload
    mask = b"\x01\x02\x03\x04"
    return bytes((0x80 | opcode,)) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _payload(kind: T, n: int) -> bytes:
    return (
        (b"t" if kind is T.TEXT else b"\x00\xff")[:1] * n
        if kind is T.TEXT
        else bytes(i % 251 for i in range(n))
    )


def _wire(shape: list[tuple[T, int]], ending: str, from_client: bool) -> tuple[bytes, list]:
    """The raw bytes one side sends, and the messages the other side must get (good frames only)."""
    out, expect = b"", []
    for kind, n in shape:
        data = _payload(kind, n)
        out += _frame(OPCODES[kind], data, masked=from_client)
        expect.append((kind, data.decode() if kind is T.TEXT else data))
    if ending == "close":
        out += _frame(0x8, (1000).to_bytes(2, "big"), masked=from_client)
    elif ending == "mask":
        out += _frame(0x1, b"bad", masked=not from_client)
    elif ending == "reserved":
        out += _frame(0x3, b"x", masked=from_client)
    else:
        out += _frame(0x9, b"p" * 126, masked=from_client)
    return out, expect


@SHORT
@given(shape=frames, ending=endings)
def test_frames_from_a_drawn_upstream_reach_the_client_unchanged_until_its_fault(
    shape: list[tuple[T, int]], ending: str
) -> None:
    wire, expect = _wire(shape, ending, from_client=False)

    async def go(gw: RunningGateway) -> tuple[list, int | None]:
        got: list = []
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw), autoping=False) as ws:
            await ws.send_str(orjson.dumps(CREATE).decode())  # opens a response; then the frames come
            with contextlib.suppress(asyncio.TimeoutError):
                while (msg := await asyncio.wait_for(ws.receive(), 10)).type in OPCODES:
                    got.append((msg.type, msg.data))
                if msg.type is T.CLOSE:
                    return got, msg.data  # the code the gateway closed with
            return got, None

    async def main() -> tuple[tuple[list, int | None], list]:
        async with _RawWsUpstream(wire, after_client=True) as url:
            return await gateway_in_front_of(url, go)

    (got, code), records = asyncio.run(asyncio.wait_for(main(), 60))
    assert got == expect
    assert all(r.labels["outcome"] != "internal_error" for r in records)
    if ending == "close":
        assert code == 1000
    else:
        assert code == 1002
        assert [r.labels["outcome"] for r in records] == ["protocol_error"]
        assert all("upstream" in (r.error or "") for r in records)


@SHORT
@given(shape=frames, ending=endings)
def test_frames_from_a_drawn_client_reach_the_upstream_unchanged_until_its_fault(
    shape: list[tuple[T, int]], ending: str
) -> None:
    wire, expect = _wire(shape, ending, from_client=True)

    async def go(gw: RunningGateway) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        writer.write(
            b"GET /v1/realtime?model=m HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        await reader.readuntil(b"\r\n\r\n")
        writer.write(wire)
        got = b""
        with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), 10):
                got += chunk
        writer.close()
        return got

    async def main() -> tuple[bytes, list, EchoUpstream]:
        async with EchoUpstream() as up:
            got, records = await gateway_in_front_of(up.url, go)
            return got, records, up

    got, records, up = asyncio.run(asyncio.wait_for(main(), 60))
    seen = [(t, d) for t, d in up.seen if t is not T.CLOSE]
    assert seen == expect
    assert all(r.labels["outcome"] != "internal_error" for r in records)
    if ending != "close":
        assert b"\x88\x02\x03\xea" in got  # the client's fault: closed with 1002
