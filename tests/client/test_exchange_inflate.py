"""Issue 38: the bench client inflated a compressed body in one go inside ``data_received`` (a gzip
bomb held the loop that timestamps every other request). Now at most ``TURN_BYTES`` is inflated a
turn, the connection's reading paused meanwhile, and a body that ended meanwhile ends the request
only once all of it is read."""

from __future__ import annotations

import asyncio
import zlib

import orjson

from tokenpace.client.exchange import Measure
from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.inflate import TURN_BYTES


class _Conn:
    """What the reader asks of its connection: pause and resume reading."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")


def _gzip(data: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def _measure(loop: asyncio.AbstractEventLoop) -> tuple[Measure, _Conn]:
    m = Measure(RequestRecord("r"), get_dialect("chat"), True, loop)
    conn = _Conn()
    m.conn = conn  # type: ignore[assignment]  # duck-typed: only pause/resume are used
    ex = m.exchange
    ex.response_header(b"Content-Type", b"content-type", b"text/event-stream")
    ex.response_header(b"Content-Encoding", b"content-encoding", b"gzip")
    ex.response_head(200, 1)
    return m, conn


def _inflated(m: Measure) -> int:
    assert m.inflater is not None
    return m.inflater.max_bytes - m.inflater.left


def test_a_compressed_stream_is_inflated_a_slice_per_turn_and_ends_after_the_last_slice() -> None:
    chunk = orjson.dumps({"choices": [{"index": 0, "delta": {"content": "t" * 5000}}]})
    body = b"".join(b"data: " + chunk + b"\n\n" for _ in range(100)) + b"data: [DONE]\n\n"  # ~500 KB

    async def go() -> tuple[int, bool, int, Measure, _Conn]:
        m, conn = _measure(asyncio.get_running_loop())
        m.exchange.response_body(_gzip(body), 7)
        m.exchange.response_end(9)  # the last byte came in the same read
        first_turn, over_at_once = _inflated(m), m.exchange.done.done()
        await asyncio.wait_for(m.exchange.done, 5)
        return first_turn, over_at_once, _inflated(m), m, conn

    first_turn, over_at_once, inflated, m, conn = asyncio.run(go())
    assert first_turn <= TURN_BYTES  # one turn's slice, not the 500 KB
    assert not over_at_once  # the end waited for the rest
    assert inflated == len(body)
    rec = m.record
    assert rec.status is Status.OK and len(rec.token_ns) == 100
    assert set(rec.token_ns) == {7}  # the arrival time of the read that carried them
    assert rec.end_ns == 9 and conn.calls == ["pause", "resume"]


def test_a_bomb_is_worked_through_a_slice_per_turn_and_refused_at_its_cap() -> None:
    bomb = _gzip(b"data: " + b"x" * (70 * 1024 * 1024))  # one 70 MiB event: past every cap

    async def go() -> tuple[int, int, Measure, _Conn]:
        m, conn = _measure(asyncio.get_running_loop())
        m.exchange.response_body(bomb, 3)
        first = _inflated(m)
        turns = 0
        while not m.exchange.done.done():
            await asyncio.sleep(0)
            turns += 1
        return first, turns, m, conn

    first, turns, m, conn = asyncio.run(go())
    assert first <= TURN_BYTES and turns > 10  # many turns, each a slice, the loop free between
    assert m.record.status is Status.PROTOCOL_ERROR
    assert m.record.error in ("event over 1 MiB without a blank line", "compressed body inflates past 64 MiB")
    assert conn.calls == ["pause", "resume"]  # reading given back to the connection


def test_a_close_after_the_whole_compressed_stream_is_judged_on_all_of_it() -> None:
    """The server closed instead of ending the chunked body, after its last byte: [DONE] is in the
    part not yet inflated, so the request is ok once that part is read (as an uncompressed one is)."""
    chunk = orjson.dumps({"choices": [{"index": 0, "delta": {"content": "t" * 5000}}]})
    body = b"".join(b"data: " + chunk + b"\n\n" for _ in range(100)) + b"data: [DONE]\n\n"

    async def go() -> Measure:
        m, _ = _measure(asyncio.get_running_loop())
        m.exchange.response_body(_gzip(body), 7)
        m.exchange.response_lost(None, 9, body_ended=False)
        assert not m.exchange.done.done()  # judged only once all of it is read
        await asyncio.wait_for(m.exchange.done, 5)
        return m

    rec = asyncio.run(go()).record
    assert rec.status is Status.OK and len(rec.token_ns) == 100
