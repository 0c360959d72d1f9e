"""The shared HTTP/1.1 client kernel, fed bytes by hand: framing, keep-alive, interim responses and
the arrival timestamps every event carries."""

from __future__ import annotations

import asyncio
from itertools import count

import pytest

from tokenpace.wire.http1 import client as kernel
from tokenpace.wire.http1.client import ResponseConnection


class Recorder:
    """A ResponseHandler that writes down what it hears."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.headers: list[tuple[bytes, bytes]] = []

    def response_header(self, name: bytes, low_name: bytes, value: bytes) -> None:
        assert low_name == name.lower()
        self.headers.append((name, value))

    def response_interim(self) -> None:
        self.events.append(("interim", [n for n, _ in self.headers]))
        self.headers.clear()

    def response_head(self, status: int, now: int) -> None:
        self.events.append(("head", status, now))

    def response_body(self, data: bytes, now: int) -> None:
        self.events.append(("body", data, now))

    def response_end(self, now: int) -> None:
        self.events.append(("end", now))

    def response_lost(self, exc: Exception | None, now: int, body_ended: bool) -> None:
        self.events.append(("lost", body_ended))

    def response_malformed(self, reason: str, now: int) -> None:
        self.events.append(("malformed", reason))

    def body(self) -> bytes:
        return b"".join(e[1] for e in self.events if e[0] == "body")


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.sent.append(bytes(data))

    def abort(self) -> None:
        self.aborted = True


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> count:
    """perf_counter_ns as 1, 2, 3, ...: each reading is told apart from the others."""
    ticks = count(1)
    monkeypatch.setattr(kernel, "perf_counter_ns", lambda: next(ticks))
    return ticks


def connect(head_only: bool = False) -> tuple[ResponseConnection, Recorder, FakeTransport]:
    conn, ex, transport = ResponseConnection(), Recorder(), FakeTransport()
    conn.connection_made(transport)
    conn.start(ex, b"GET / HTTP/1.1\r\n\r\n", head_only=head_only)
    return conn, ex, transport


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"


def test_request_is_written_and_chunked_body_reassembled(clock: count) -> None:
    conn, ex, transport = connect()
    conn.data_received(CHUNKED)
    assert transport.sent == [b"GET / HTTP/1.1\r\n\r\n"]
    assert ex.body() == b"hello world"
    assert ex.events[0][:2] == ("head", 200) and ex.events[-1][0] == "end"
    assert conn.reusable and conn.exchange is None


def test_one_byte_reads_give_the_same_response_each_event_stamped_with_its_read(clock: count) -> None:
    conn, ex, _ = connect()
    for i in range(len(CHUNKED)):
        conn.data_received(CHUNKED[i : i + 1])
    assert ex.body() == b"hello world"
    # One clock reading per read, taken before parsing: the head's stamp is the read that ended it
    # (reading n is n + 1: the first went to the new connection's idle clock).
    head_read = CHUNKED.index(b"\r\n\r\n") + 4
    assert ex.events[0] == ("head", 200, head_read + 1)
    first_body_read = CHUNKED.index(b"hello") + 1
    assert ex.events[1] == ("body", b"h", first_body_read + 1)
    assert ex.events[-1] == ("end", len(CHUNKED) + 1)
    assert conn.reusable


def test_pieces_in_one_read_share_that_read_timestamp(clock: count) -> None:
    conn, ex, _ = connect()
    conn.data_received(CHUNKED[:60])
    conn.data_received(CHUNKED[60:])
    stamps = {e[-1] for e in ex.events}
    assert stamps == {2, 3}  # reading 1 went to the new connection's idle clock


def test_keep_alive_serves_two_responses_in_a_row(clock: count) -> None:
    conn, first, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert first.body() == b"ok" and conn.reusable
    second = Recorder()
    conn.start(second, b"GET /2 HTTP/1.1\r\n\r\n")
    conn.data_received(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")
    assert second.events[0][:2] == ("head", 404) and second.body() == b"nope"
    assert len(first.events) == 3  # nothing of the second response reached the first exchange


def test_connection_close_response_is_not_reusable(clock: count) -> None:
    conn, ex, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    assert ex.events[-1][0] == "end"
    assert not conn.reusable


def test_close_delimited_body_ends_with_a_clean_close_only(clock: count) -> None:
    conn, ex, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart")
    conn.connection_lost(None)
    assert ex.events[-1] == ("lost", True) and ex.body() == b"part"

    conn, ex, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart")
    conn.connection_lost(ConnectionResetError())
    assert ex.events[-1] == ("lost", False)


def test_framed_body_cut_by_the_close_is_not_complete(clock: count) -> None:
    conn, ex, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
    conn.connection_lost(None)
    assert ex.events[-1] == ("lost", False)

    conn, ex, _ = connect()
    conn.connection_lost(None)  # before any header
    assert ex.events == [("lost", False)]


def test_interim_1xx_responses_are_skipped(clock: count) -> None:
    conn, ex, _ = connect()
    conn.data_received(
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Final: 1\r\n\r\nok"
    )
    assert [e[0] for e in ex.events] == ["interim", "interim", "head", "body", "end"]
    assert ex.events[1] == ("interim", [b"Link"])
    assert ex.headers == [(b"Content-Length", b"2"), (b"X-Final", b"1")]
    assert conn.reusable


def test_head_response_ends_at_its_headers_and_is_not_reused(clock: count) -> None:
    conn, ex, _ = connect(head_only=True)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
    assert [e[0] for e in ex.events] == ["head", "end"]
    assert conn.exchange is None and not conn.reusable


def test_malformed_response_is_reported_once_and_the_connection_dropped(clock: count) -> None:
    conn, ex, transport = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n")
    conn.data_received(b"no colon in this header line\r\n\r\nhello")
    conn.data_received(b"more bytes after the error")
    conn.connection_lost(None)
    assert [e[0] for e in ex.events] == ["malformed"]
    assert ex.events[0][1].startswith("malformed HTTP response: ")
    assert transport.aborted and not conn.reusable


def test_error_raised_by_the_exchange_is_named_as_the_cause(clock: count) -> None:
    class Raising(Recorder):
        def response_body(self, data: bytes, now: int) -> None:
            raise ValueError("cannot digest this")

    conn, transport = ResponseConnection(), FakeTransport()
    conn.connection_made(transport)
    ex = Raising()
    conn.start(ex, b"GET / HTTP/1.1\r\n\r\n")
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
    assert ex.events[-1] == ("malformed", "unexpected response: cannot digest this")
    assert transport.aborted


class PausingTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def test_one_byte_chunks_are_coalesced_and_bounded_per_turn(clock: count) -> None:
    asyncio.run(_one_byte_chunks())


async def _one_byte_chunks() -> None:
    """Issue 38, class 1: a read of ~10,000 one-byte HTTP chunks is not ~10,000 calls in one turn:
    its pieces reach the exchange coalesced, at most PIECES_PER_TURN parsed per turn, reading
    paused until the rest is parsed, and the body arrives whole and in order."""
    conn, ex, _ = connect()
    transport = PausingTransport()
    conn.connection_made(transport)
    body = bytes(range(256)) * 30  # under the per-second budget: only the per-turn one applies
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    wire += b"".join(b"1\r\n%b\r\n" % body[i : i + 1] for i in range(len(body))) + b"0\r\n\r\n"
    conn.data_received(wire)
    first = ex.body()
    assert 0 < len(first) <= kernel.PIECES_PER_TURN
    assert not transport.reading  # the rest waits for later turns
    assert sum(1 for e in ex.events if e[0] == "body") == 1  # coalesced: one hand-over, not hundreds
    turns = 0
    while not any(e[0] == "end" for e in ex.events):
        await asyncio.sleep(0)
        turns += 1
        assert turns < 100
    assert ex.body() == body
    assert turns >= len(body) // (kernel.PIECES_PER_TURN)
    await asyncio.sleep(0)  # a heavy last turn yields one more before reading resumes
    assert transport.reading
    assert sum(1 for e in ex.events if e[0] == "body") <= turns + 1
    assert len({e[2] for e in ex.events if e[0] == "body"}) == 1  # all timed at the read's arrival


def test_held_reading_is_not_resumed_by_the_budget(clock: count) -> None:
    asyncio.run(_held_reading())


async def _held_reading() -> None:
    conn, ex, _ = connect()
    transport = PausingTransport()
    conn.connection_made(transport)
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 5000 + b"0\r\n\r\n"
    conn.data_received(wire)
    conn.pause_reading()  # the consumer's client reads slower
    for _ in range(5):
        await asyncio.sleep(0)
    held = len(ex.body())
    assert held < 5000 and not transport.reading
    conn.resume_reading()
    for _ in range(50):
        await asyncio.sleep(0)
    assert ex.body() == b"x" * 5000 and transport.reading


def test_an_upgrade_answer_is_malformed_not_a_traceback(clock: count) -> None:
    """Issue 38, edge: an upstream's 101 Switching Protocols raised HttpParserUpgrade uncaught."""
    conn, ex, transport = connect()
    conn.data_received(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nxx"
    )
    assert ex.events[-1][0] == "malformed" and "101" in ex.events[-1][1]
    assert transport.aborted


def test_backlog_left_at_close_is_parsed(clock: count) -> None:
    conn, ex, _ = connect()
    transport = PausingTransport()
    conn.connection_made(transport)
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\ny\r\n" * 5000 + b"0\r\n\r\n"

    async def go() -> int:
        conn.connection_made(transport)  # on the loop: its turns are shared
        conn.data_received(wire)
        conn.connection_lost(None)
        turns = 0  # parsed a share a turn after the close too, not all in the close's callback
        while ex.events[-1][0] not in ("end", "lost"):
            await asyncio.sleep(0)
            turns += 1
        return turns

    turns = asyncio.run(go())
    assert ex.body() == b"y" * 5000 and ex.events[-1][0] == "end"
    assert turns >= 5000 // kernel.PIECES_PER_TURN


def test_aborting_while_the_backlog_drains_tells_the_exchange_at_once(clock: count) -> None:
    conn, ex, _ = connect()
    transport = PausingTransport()
    conn.connection_made(transport)
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\ny\r\n" * 5000

    async def go() -> None:
        conn.connection_made(transport)
        conn.data_received(wire)
        conn.connection_lost(None)
        await asyncio.sleep(0)
        conn.abort()  # e.g. the request timed out meanwhile
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert ex.events[-1][0] == "lost" and 0 < len(ex.body()) < 5000
    assert [e[0] for e in ex.events].count("lost") == 1


def test_a_peer_past_its_pieces_per_second_waits_for_the_next_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, class 1: a peer sending one byte per chunk gets at most PIECES_PER_SECOND parsed a
    second, however many turns it gets: the rest waits, reading paused, for the next second."""
    monkeypatch.setattr(kernel, "PIECES_PER_SECOND", 300)

    async def main() -> tuple[int, bool, int]:
        conn, ex, _ = connect()
        transport = PausingTransport()
        conn.connection_made(transport)
        wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nz\r\n" * 1000 + b"0\r\n\r\n"
        conn.data_received(wire)
        for _ in range(50):  # many turns, all in the same second
            await asyncio.sleep(0)
        first_second, paused = len(ex.body()), not transport.reading
        while not any(e[0] == "end" for e in ex.events):
            await asyncio.sleep(0.05)
        return first_second, paused, len(ex.body())

    first_second, paused, total = asyncio.run(asyncio.wait_for(main(), 20))
    assert first_second <= 300 + kernel.PIECES_PER_TURN  # one turn past it at most
    assert paused and total == 1000


def test_a_sized_body_is_fed_to_its_end_not_in_small_slices(clock: count) -> None:
    """Slices are sized so they cannot hold more pieces than the budget has left, but a body with a
    length is one piece a feed however long: it is fed to its end at once (a large whole response is
    not slowed), head and all three units."""
    conn, ex, _ = connect()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n" + b"j" * 40_000)
    assert ex.body() == b"j" * 40_000 and ex.events[-1][0] == "end"
    assert conn.pieces <= 3  # the head, the body's start in the head's slice, the rest in one


def test_a_throttled_connection_is_read_at_its_rate_then_at_full_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 49, item 1: the rate's clock is the loop's, so a burst past PIECES_PER_SECOND is read
    at that rate (not at one turn's share a second for good, as when the budget was timed by the
    last read, which does not move while reading is paused), and once the burst is through the
    connection is not throttled at all. Time is a fake loop clock advanced by each wait asked for."""
    monkeypatch.setattr(kernel, "PIECES_PER_SECOND", 300)
    now = [0.0]
    monkeypatch.setattr(kernel, "loop_clock", lambda: lambda: now[0])
    waits: list[float | None] = []
    monkeypatch.setattr(ResponseConnection, "_wait", lambda self, delay: waits.append(delay))
    conn, ex, _ = connect()
    conn.connection_made(PausingTransport())

    def drain() -> None:  # the loop: each wait served, the clock moved by the time asked for
        while waits:
            delay = waits.pop()
            now[0] += delay or 0.0
            conn.take_turn(kernel.PIECES_PER_TURN)

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    conn.data_received(head + b"1\r\nz\r\n" * 1000)  # the burst: 1,000 one-byte chunks at once
    drain()
    assert len(ex.body()) == 1000
    assert 2.2 < now[0] < 2.6  # the 700 past the burst at 300 a second (was ~1 s per 128: ~6 s)
    burst_done = now[0]
    now[0] += 1.0  # a second later, pieces arrive at a healthy pace: none waits
    for _ in range(250):
        conn.data_received(b"1\r\ny\r\n")
        assert not waits
    conn.data_received(b"0\r\n\r\n")
    assert ex.events[-1][0] == "end" and len(ex.body()) == 1250 and now[0] == burst_done + 1.0
