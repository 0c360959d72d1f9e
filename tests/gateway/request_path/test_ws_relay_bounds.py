"""The WebSocket relay's bounds (issue 49, item 2): each direction relays under the loop's work
budget, a share a turn, so a ping flood from either side never holds the loop; and an upstream's
broken framing is blamed on the upstream. Turns are counted by the event loop itself."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import orjson
import pytest

from gateway.request_path.test_ws_proxy import CREATE, _RawWsUpstream, gateway_in_front_of, ws_of
from tokenpace.core.record import Status
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.request_path import ws_proxy


class CountingLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.turn = 0

    def _run_once(self) -> None:
        self.turn += 1
        super()._run_once()  # type: ignore[misc]


class Flood:
    """A side whose queue always holds the next message (aiohttp hands those over without a
    yield): ``n`` pings, then a close."""

    def __init__(self, n: int) -> None:
        self.left = n

    async def receive(self) -> aiohttp.WSMessage:
        self.left -= 1
        if self.left >= 0:
            return aiohttp.WSMessage(aiohttp.WSMsgType.PING, b"p", None)
        return aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 1000, "")


class Sink:
    def __init__(self, loop: CountingLoop) -> None:
        self.loop = loop
        self.per_turn: dict[int, int] = {}
        self.closed = False

    async def ping(self, data: bytes) -> None:  # a writer that never has to drain
        self.per_turn[self.loop.turn] = self.per_turn.get(self.loop.turn, 0) + 1

    async def close(self, code: int, message: bytes) -> bool:
        self.closed = True
        return True


@pytest.mark.parametrize("direction", ["from the client", "from the upstream"])
def test_a_ping_flood_is_relayed_a_share_a_turn_beside_other_work(direction: str) -> None:
    loop = CountingLoop()
    sink = Sink(loop)
    ticks = [0]
    closes: list[tuple[int, str, str]] = []

    async def ticker() -> None:  # another stream's work on the same loop: runs once a turn
        while not sink.closed:
            ticks[0] += 1
            await asyncio.sleep(0)

    async def main() -> None:
        broken = None if direction == "from the client" else (lambda reason: None)
        other = asyncio.ensure_future(ticker())
        await ws_proxy._pump(Flood(5000), sink, lambda t, n: None, closes, broken)  # type: ignore[arg-type]
        await other

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert sum(sink.per_turn.values()) == 5000 and sink.closed  # every ping relayed, then the close
    assert max(sink.per_turn.values()) <= ws_proxy.MESSAGES_PER_TURN
    assert len(sink.per_turn) >= 5000 // ws_proxy.MESSAGES_PER_TURN
    assert ticks[0] >= 5000 // ws_proxy.MESSAGES_PER_TURN  # the rest of the loop ran meanwhile
    assert closes == [(1000, "", "client" if direction == "from the client" else "upstream")]


@pytest.mark.parametrize(
    "frames",
    [
        b"\x83\x01x",  # a reserved opcode
        b"\x81\x02\xff\xfe",  # text that is not UTF-8
        b"\x89\x7e\x00\x80" + b"p" * 128,  # a control frame over 125 bytes
    ],
)
def test_an_upstreams_broken_framing_is_blamed_on_the_upstream(frames: bytes) -> None:
    """Was recorded as client_disconnect: now the open response is the upstream's protocol error,
    and the reason names the upstream and the code."""

    async def main() -> tuple[None, list]:
        async with _RawWsUpstream(frames, after_client=True) as url:

            async def go(gw: RunningGateway) -> None:
                async with aiohttp.ClientSession() as s, s.ws_connect(ws_of(gw)) as ws:
                    await ws.send_str(orjson.dumps(CREATE).decode())
                    with contextlib.suppress(asyncio.TimeoutError):
                        while (await asyncio.wait_for(ws.receive(), 5)).type not in (
                            aiohttp.WSMsgType.CLOSE,
                            aiohttp.WSMsgType.CLOSED,
                            aiohttp.WSMsgType.ERROR,
                        ):
                            pass

            return await gateway_in_front_of(url, go)

    _, records = asyncio.run(asyncio.wait_for(main(), 30))
    (rec,) = records
    assert rec.status is Status.PROTOCOL_ERROR and rec.labels["outcome"] == "protocol_error"
    assert rec.error is not None and rec.error.startswith("the upstream broke the WebSocket protocol (")


class Queue:
    """aiohttp's message queue as a flood leaves it: a ping is always there (no yield)."""

    def __init__(self) -> None:
        self.read_count = 0

    async def read(self) -> aiohttp.WSMessage:
        self.read_count += 1
        return aiohttp.WSMessage(aiohttp.WSMsgType.PING, b"", None)


class Closing:
    """A session whose close reads its queue until the peer's close, as aiohttp's does."""

    def __init__(self) -> None:
        self._reader = Queue()

    async def close(self) -> bool:
        try:
            while (await self._reader.read()).type is not aiohttp.WSMsgType.CLOSE:
                pass
        except Exception:  # aiohttp: an abnormal closure, the connection dropped
            return False
        return True


def test_closing_beside_a_ping_flood_reads_a_bounded_share_a_turn_then_drops() -> None:
    """aiohttp's close read a flood's queue to its end without yielding (17 s in one case); through
    the bounded drain it reads at most CLOSE_DRAIN_MESSAGES, a share a turn, then gives up."""
    loop = CountingLoop()
    ws = Closing()
    queue = ws._reader
    ticks = [0]
    done = [False]

    async def ticker() -> None:
        while not done[0]:
            ticks[0] += 1
            await asyncio.sleep(0)

    async def main() -> bool:
        other = asyncio.ensure_future(ticker())
        closed = await ws_proxy._bounded_close(ws, ws.close)
        done[0] = True
        await other
        return closed

    try:
        closed = loop.run_until_complete(main())
    finally:
        loop.close()
    assert closed is False  # dropped, not a clean close
    assert queue.read_count == ws_proxy.CLOSE_DRAIN_MESSAGES
    assert ticks[0] >= ws_proxy.CLOSE_DRAIN_MESSAGES // ws_proxy.MESSAGES_PER_TURN - 1
    assert ws._reader is queue  # aiohttp's own queue back in place
