"""The loop-wide work budget (issue 38): N hostile peers on one loop together parse no more per
loop turn than ``UNITS_PER_TURN``, served round-robin so each finishes, and a healthy stream's read
is parsed within one turn of its arrival. Turns are counted by the event loop itself (one per
``_run_once``), work by the parser's callbacks, not by the budget's own books."""

from __future__ import annotations

import asyncio
from typing import Any

from tokenpace.testing.fuzz_peers import BOM, Peer
from tokenpace.wire.http1.client import ResponseConnection
from tokenpace.wire.http1.turn_budget import UNITS_PER_TURN, PieceRate, feed_bytes


class CountingLoop(asyncio.SelectorEventLoop):
    """Numbers its turns, and notes the work units parsed in each."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0
        self.units = {"hostile": 0, "healthy": 0}
        self.per_turn: list[dict[str, int]] = []

    def _run_once(self) -> None:
        self.turn += 1
        super()._run_once()  # type: ignore[misc]
        self.per_turn.append(dict(self.units))
        self.units["hostile"] = self.units["healthy"] = 0


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def write(self, data: Any) -> None: ...
    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def abort(self) -> None: ...


class Peer1(ResponseConnection):
    """A connection whose parser's callbacks count as ``kind`` on the loop."""

    kind = "hostile"

    def on_body(self, body: bytes) -> None:
        asyncio.get_running_loop().units[self.kind] += 1  # type: ignore[attr-defined]
        super().on_body(body)

    def on_headers_complete(self) -> None:
        asyncio.get_running_loop().units[self.kind] += 1  # type: ignore[attr-defined]
        super().on_headers_complete()


class Healthy(Peer1):
    kind = "healthy"


class Exchange:
    def __init__(self, loop: CountingLoop) -> None:
        self.loop = loop
        self.body: list[bytes] = []
        self.turns: list[int] = []  # the loop turn each body piece arrived in
        self.ended = False

    def response_header(self, *a: Any) -> None: ...
    def response_interim(self) -> None: ...
    def response_head(self, status: int, now: int) -> None: ...
    def response_body(self, data: bytes, now: int) -> None:
        self.body.append(data)
        self.turns.append(self.loop.turn)

    def response_end(self, now: int) -> None:
        self.ended = True

    def response_lost(self, *a: Any) -> None: ...
    def response_malformed(self, reason: str, now: int) -> None:
        raise AssertionError(reason)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
HOSTILE = [
    Peer(tokens=100, chunks=(1,)),  # every byte its own HTTP chunk
    Peer(tokens=100, bom=True, line_end=b"\r", chunks=(7, 3)),  # BOM, CR-only lines, 7/3-byte chunks
]


def _crowd(n_hostile: int, n_healthy: int, reads: int) -> tuple[CountingLoop, list[Exchange], list[Exchange]]:
    loop = CountingLoop()

    async def main() -> tuple[list[Exchange], list[Exchange]]:
        hostile: list[tuple[ResponseConnection, Exchange, bytes]] = []
        conn: ResponseConnection
        for i in range(n_hostile):
            conn, ex = Peer1(), Exchange(loop)
            conn.connection_made(Transport())
            conn.start(ex, b"")  # type: ignore[arg-type]
            hostile.append((conn, ex, HOSTILE[i % len(HOSTILE)].wire()))
        healthy: list[tuple[ResponseConnection, Exchange]] = []
        for _ in range(n_healthy):
            conn, ex = Healthy(), Exchange(loop)
            conn.connection_made(Transport())
            conn.start(ex, b"")  # type: ignore[arg-type]
            conn.data_received(HEAD)
            healthy.append((conn, ex))
        for conn, _, wire in hostile:  # all of them in one turn: one read each, ~10,000 pieces
            conn.data_received(wire)
        for k in range(reads):  # a healthy event per turn each, beside them
            for conn, ex in healthy:
                if k == reads - 1:
                    conn.data_received(b"%x\r\n%b\r\n0\r\n\r\n" % (len(EVENT), EVENT))
                else:
                    conn.data_received(b"%x\r\n%b\r\n" % (len(EVENT), EVENT))
                ex.turns.append(-loop.turn)  # the turn it arrived in (negative: an arrival)
            await asyncio.sleep(0)
        for _ in range(5000):
            if all(ex.ended for _, ex, _ in hostile):
                break
            await asyncio.sleep(0)
        return [ex for _, ex, _ in hostile], [ex for _, ex in healthy]

    try:
        hostile, healthy = loop.run_until_complete(main())
    finally:
        loop.close()
    return loop, hostile, healthy


def test_n_hostile_peers_together_get_one_turns_budget() -> None:
    loop, hostile, healthy = _crowd(n_hostile=20, n_healthy=3, reads=40)
    busiest = max(t["hostile"] for t in loop.per_turn)
    assert busiest <= UNITS_PER_TURN  # 20 per-connection budgets were 20 x 128 and more
    assert max(t["hostile"] + t["healthy"] for t in loop.per_turn) <= UNITS_PER_TURN
    assert busiest >= UNITS_PER_TURN // 2  # the budget is used, not starved by the sharing
    for i, ex in enumerate(hostile):  # round-robin: none starves; each body whole and in order
        assert ex.ended, i
        assert b"".join(ex.body) == HOSTILE[i % len(HOSTILE)].body()
    for ex in healthy:
        assert ex.ended
        assert b"".join(ex.body) == EVENT * 40
        arrived = [-t for t in ex.turns if t <= 0]
        parsed = [t for t in ex.turns if t > 0]
        # every read parsed in its own turn or the next, never held behind the hostile ones longer
        assert all(p - a <= 1 for a, p in zip(arrived, parsed, strict=True))


def test_forty_hostile_peers_keep_the_bound_and_all_finish() -> None:
    loop, hostile, healthy = _crowd(n_hostile=40, n_healthy=12, reads=10)
    assert max(t["hostile"] + t["healthy"] for t in loop.per_turn) <= UNITS_PER_TURN
    assert all(ex.ended for ex in hostile) and all(ex.ended for ex in healthy)
    for ex in healthy:
        arrived = [-t for t in ex.turns if t <= 0]
        parsed = [t for t in ex.turns if t > 0]
        assert all(p - a <= 1 for a, p in zip(arrived, parsed, strict=True))


def test_a_feed_sized_for_n_units_holds_no_more() -> None:
    """The slice rule the bound rests on: ``feed_bytes(n)`` bytes of the densest stream (one-byte
    chunks, a BOM'd CR-only one cut in 3 bytes) never hold more than n pieces."""

    class Count(ResponseConnection):
        def on_body(self, body: bytes) -> None:
            self.pieces += 1

    for peer in (Peer(tokens=50, chunks=(1,)), Peer(tokens=50, bom=True, line_end=b"\r", chunks=(3,))):
        wire = peer.wire()
        body_at = wire.index(b"\r\n\r\n") + 4
        for n in (1, 2, 8, 128):
            size = feed_bytes(n)
            for start in range(body_at, body_at + 12):  # every alignment against the chunk framing
                conn = Count()
                conn.parser.feed_data(wire[:start])
                conn.pieces = 0
                conn.parser.feed_data(wire[start : start + size])
                assert conn.pieces <= n, (peer, n, start)
    assert BOM  # the BOM'd peer above starts its body with one


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_piece_rate_is_refilled_by_the_clock_not_by_reads() -> None:
    """Issue 49, item 1: past its budget a connection waits the time one unit takes to refill, and
    the time that passes while it waits (reading paused, no read to time it) refills it: after a
    pause as long as a second's budget, a whole second's worth is read at once."""
    clock = FakeClock()
    rate = PieceRate(1000, clock)
    assert rate.spend(999) == 0.0  # the burst: the whole budget without a wait
    delay = rate.spend(128)
    assert 0.12 < delay < 0.14  # the units it is short of, at 1000 a second
    clock.t += delay
    assert rate.spend(0) == 0.0  # refilled by the loop's clock, not by a read
    clock.t += 5.0  # a long pause: the budget is back whole, never more than its burst
    assert rate.spend(999) == 0.0
    assert rate.spend(2) > 0.0


def test_a_piece_rate_holds_a_flood_to_its_rate() -> None:
    """Spent in slices of 128 and waiting as told, a flood is read at the rate (plus one burst)."""
    clock = FakeClock()
    rate = PieceRate(1000, clock)
    spent = 0
    while clock.t < 110.0:
        clock.t += rate.spend(128)
        spent += 128
    assert 1000 * 10 <= spent <= 1000 * 11 + 128
