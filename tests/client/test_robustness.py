"""Edges found in review: odd framing, odd JSON, stops at awkward moments, a failing record sink."""

import asyncio
import errno
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.adapters.servermetrics.parse import parse_metrics
from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.client import Sender
from tokenpace.core.analysis.diagnosis.engine_metrics import analyse
from tokenpace.core.record import RequestRecord, Status
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.testing.wire_upstream import ClosingRace
from tokenpace.wire import pool as pool_module
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import parse_endpoint

FAST = Script(ttft_s=0.005, itl_s=0.001)


class RawServer:
    """Answers every request with fixed bytes, then (optionally) closes the connection."""

    def __init__(self, reply: bytes, close: bool) -> None:
        self.reply, self.close = reply, close

    async def __aenter__(self) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(self.reply)
            await writer.drain()
            if self.close:
                writer.close()
            else:
                await asyncio.sleep(10)

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


async def send_one(url: str, stream: bool, timeout_s: float = 2.0) -> RequestRecord:
    s = Sender(parse_endpoint(url), get_dialect("chat"), "m", Sampling(), stream, timeout_s)
    r = RequestRecord("x")
    await s.send(r, s.prepare("a b", 4, "x"))
    await s.close()
    return r


def test_body_ended_by_the_close_is_a_complete_response():
    body = (
        b'{"choices":[{"message":{"content":"hi there"},"finish_reason":"stop"}],'
        b'"usage":{"completion_tokens":2}}'
    )

    async def go():
        async with RawServer(
            b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body, True
        ) as url:
            return await send_one(url, stream=False)

    r = asyncio.run(go())
    assert r.status is Status.OK and r.output_tokens == 2


@pytest.mark.parametrize(
    "body", [b'{"choices":["x"]}', b'{"usage":5,"choices":[]}', b'{"choices":[{"message":"hi"}]}']
)
def test_unexpected_json_shape_is_a_protocol_error_at_once_not_a_timeout(body):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)

    async def go():
        async with RawServer(head + body, False) as url:
            return await send_one(url, stream=False, timeout_s=5.0)

    r = asyncio.run(go())
    assert r.status is Status.PROTOCOL_ERROR and "unexpected" in r.error
    assert (r.end_ns - r.sent_ns) < 2e9  # answered, not left to the 5 s timeout


def test_os_connect_timeout_is_a_connect_error(monkeypatch):
    async def dial(*args):
        raise TimeoutError(errno.ETIMEDOUT, "Connection timed out")

    monkeypatch.setattr(pool_module, "dial", dial)
    r = asyncio.run(send_one("http://127.0.0.1:9/v1", stream=True))
    assert r.status is Status.CONNECT_ERROR and "timed out" in r.error


def test_a_connect_past_the_timeout_is_a_timeout_and_a_users_cancel_stays_a_cancel(monkeypatch):
    async def dial(*args):
        await asyncio.sleep(60)  # a connect that never completes

    monkeypatch.setattr(pool_module, "dial", dial)
    r = asyncio.run(send_one("http://127.0.0.1:9/v1", stream=True, timeout_s=0.2))
    assert r.status is Status.TIMEOUT and r.error == "no connection within 0.2s"

    async def cancelled_by_the_user() -> bool:
        s = Sender(parse_endpoint("http://127.0.0.1:9/v1"), get_dialect("chat"), "m", Sampling(), True, 0.2)
        task = asyncio.ensure_future(s.send(RequestRecord("x"), s.prepare("a", 2, "x")))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(cancelled_by_the_user())


def config(url: str, **kw: Any) -> BenchConfig:
    defaults = {"input_len": "8", "output_len": "4", "timeout_s": 5.0, "server_metrics": "off"}
    return bench_config(url, **{**defaults, **kw})


def test_stop_before_sending_starts_sends_nothing_in_open_loop():
    async def go():
        async with ScriptedServer(FAST) as srv:
            run = BenchRun(config(srv.url, rate=50, requests=20))
            run.stop()
            result = await run.run()
            return result, srv

    result, srv = asyncio.run(go())
    assert result.records == [] and srv.stats.truth == {}
    assert result.interrupted


def test_a_failing_record_sink_stops_the_run_with_a_reason():
    def sink(record):
        raise OSError(errno.ENOSPC, "No space left on device")

    async def go():
        async with ScriptedServer(FAST) as srv:
            return await BenchRun(config(srv.url, concurrency=4, requests=100), on_record=sink).run()

    result = asyncio.run(go())
    assert result.stop_reason.startswith("aborted: could not save a record")
    assert len(result.records) < 100


def test_duration_ends_sending_even_with_a_saturated_cap():
    slow = Script(ttft_s=0.2, itl_s=0.001)

    async def go():
        async with ScriptedServer(slow) as srv:
            return await BenchRun(
                config(srv.url, rate=100, arrival="constant", max_concurrency=1, duration_s=0.5)
            ).run()

    result = asyncio.run(go())
    sent = [r for r in result.records if r.sent_ns]
    first = min(r.scheduled_ns for r in result.records)
    assert all(r.sent_ns - first < 0.5e9 for r in sent)  # nothing went out after --duration
    not_sent = result.summary.counts["not_sent"]
    assert not_sent > 0 and not_sent + len(sent) == len(result.records)
    assert result.summary.counts["sent"] == len(sent)


def test_cap_holding_back_the_load_is_said():
    slow = Script(ttft_s=0.05, itl_s=0.001)

    async def go():
        async with ScriptedServer(slow) as srv:
            return await BenchRun(
                config(srv.url, rate=200, arrival="constant", max_concurrency=2, requests=60)
            ).run()

    result = asyncio.run(go())
    assert any(w.startswith("LOAD BELOW THE RATE ASKED") for w in result.warnings)


def test_measured_requests_wait_for_the_warm_up_in_closed_loop():
    async def go():
        async with ScriptedServer(Script(ttft_s=0.02, itl_s=0.001)) as srv:
            return await BenchRun(config(srv.url, concurrency=4, requests=8, warmup=2)).run()

    result = asyncio.run(go())
    warm_end = max(r.end_ns for r in result.records if r.warmup)
    assert all(r.sent_ns >= warm_end for r in result.records if not r.warmup)


class _OneShot:
    """Answers the first request on each connection, then either reads the next one and resets the
    connection (``read_then_reset``: the server provably saw it) or closes right after answering
    (an idle close the client can see before it writes). Counts the POSTs it read."""

    BODY = b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

    def __init__(self, read_then_reset: bool) -> None:
        self.read_then_reset = read_then_reset
        self.posts = 0

    async def __aenter__(self) -> str:
        async def handle(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await reader.read(65536)
            self.posts += 1
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
            writer.write(head % len(self.BODY) + self.BODY)
            await writer.drain()
            if not self.read_then_reset:
                writer.close()  # idle close: FIN right after the answer
                return
            await reader.readuntil(b"\r\n\r\n")  # the next request on this connection: read it...
            self.posts += 1
            writer.transport.abort()  # ...and reset without answering

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc):
        self.server.close()


def _four_requests(read_then_reset: bool, resend: bool):
    server = _OneShot(read_then_reset)

    async def go():
        async with server as url:
            s = Sender(parse_endpoint(url), get_dialect("chat"), "m", Sampling(), True, 2.0,
                       resend_unanswered=resend)  # fmt: skip
            records = []
            for i in range(4):
                r = RequestRecord(str(i))
                await s.send(r, s.prepare("a", 2, str(i)))
                await asyncio.sleep(0.05)  # let an idle close arrive, as between a user's requests
                records.append(r)
            opened = s.open_connections
            await s.close()
            return records, opened, s.keepalive.stopped

    records, opened, stopped = asyncio.run(go())
    return records, opened, server.posts, stopped


def test_a_request_the_server_read_is_never_resent_silently():
    records, opened, posts, _ = _four_requests(read_then_reset=True, resend=False)
    # the server kept the first connection open after answering, then read and dropped request 1:
    # recorded, not resent, and the run stops reusing connections to that server
    assert [r.status for r in records] == [Status.OK, Status.STREAM_INTERRUPTED, Status.OK, Status.OK]
    assert "not resent" in records[1].error and "reused keep-alive connection" in records[1].error
    assert all(r.attempts == 1 and r.first_sent_ns is None for r in records)
    assert all(r.connect_ns is not None for r in records[2:])  # new connections from then on
    assert posts == 4  # one POST per record: nothing sent twice
    assert opened == 0  # the dropped connections were closed, not leaked


def test_resend_when_allowed_is_recorded_on_the_record():
    records, opened, posts, _ = _four_requests(read_then_reset=True, resend=True)
    assert [r.status for r in records] == [Status.OK] * 4
    # request 1 was read and dropped on the reused connection and resent on a new one
    assert [r.attempts for r in records] == [1, 2, 1, 1]
    assert records[1].first_sent_ns is not None and records[1].first_sent_ns < records[1].sent_ns
    assert posts == 5  # the server saw both attempts of the resent request
    assert opened == 0


def test_a_request_the_server_never_received_is_resent_and_recorded(monkeypatch):
    """The server closes its idle connection in the instant between the client's last look at it
    and the write (a race no check can close): its TCP never acknowledges the request, so the
    request provably went unread and is sent once more on a new connection, with the attempt on
    the record and the server reading it exactly once."""

    async def go(race: ClosingRace):
        s = Sender(parse_endpoint(race.url), get_dialect("chat"), "m", Sampling(), True, 5.0)
        first, second = RequestRecord("0"), RequestRecord("1")
        for chunked in (True, False):  # as if the server had kept a connection open before
            s.keepalive.judge(chunked, closed_after_answering=False, look_s=s.pool.look_s)
        await s.send(first, s.prepare("a", 2, "0"))
        monkeypatch.setattr(pool_module, "look_before_send", race.look)
        await s.send(second, s.prepare("a", 2, "1"))
        await s.close()
        return first, second

    with ClosingRace() as race:
        first, second = asyncio.run(go(race))
    posts = race.posts
    assert first.status is Status.OK and first.attempts == 1
    assert second.status is Status.OK, second.error
    assert second.attempts == 2 and second.first_sent_ns is not None
    assert len(posts) == 2  # the server read request 0 and the resend of request 1: nothing twice


def test_a_connection_closed_while_idle_is_never_written_to():
    records, _, posts, reuse_stopped = _four_requests(read_then_reset=False, resend=False)
    assert [r.status for r in records] == [Status.OK] * 4
    assert all(r.attempts == 1 for r in records)
    assert all(r.connect_ns is not None for r in records)  # each on a new connection
    assert posts == 4
    assert "closed a kept-alive connection within 1 ms of answering" in reuse_stopped


def test_usage_fractions_are_averaged_across_engines():
    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.5\nvllm:kv_cache_usage_perc{engine="1"} 0.7\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_running{engine="1"} 4\n'
    )
    out = analyse([{"t_ns": 0, "samples": parse_metrics(text)}], [], start_ns=0)
    assert out["series"]["kv_usage"] == [[0.0, pytest.approx(0.6)]]
    assert out["series"]["running"] == [[0.0, 7.0]]
