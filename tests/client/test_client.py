"""The client against a scripted server: every failure becomes a record with a reason."""

import asyncio

import pytest

from tokenpace.client import Sender
from tokenpace.core.record import RequestRecord, Status, TokenSource
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import EndpointError, parse_endpoint


async def one(script: Script, *, api="chat", stream=True, timeout_s=5.0, max_tokens=8, n=1):
    async with ScriptedServer(script) as srv:
        sender = Sender(parse_endpoint(srv.url), get_dialect(api), "m", Sampling(), stream, timeout_s)
        records = []
        for i in range(n):
            r = RequestRecord(f"req-{i}")
            await sender.send(r, sender.prepare("a b c", max_tokens, f"req-{i}"))
            records.append(r)
        opened = sender.connections_opened
        await sender.close()
        return records, srv, opened


def run(coro):
    return asyncio.run(coro)


def test_stream_is_timed_from_the_first_token_chunk_not_the_role_chunk():
    (r,), srv, _ = run(one(Script(ttft_s=0.03, itl_s=0.005, null_first_content=True)))
    assert r.status is Status.OK and r.finish_reason == "length"
    assert r.output_tokens_counted == 8 and r.output_tokens_server == 8
    assert r.output_tokens_source is TokenSource.SERVER
    assert r.prompt_tokens == 3
    assert r.first_token_ns == r.token_ns[0]
    truth = srv.stats.truth["req-0"]
    # the first token left the server at truth[0]; the client cannot have seen it before
    assert r.first_token_ns >= truth[0]
    assert r.first_token_ns - r.sent_ns >= 30_000_000
    assert r.headers_ns < r.first_token_ns <= r.end_ns


def test_keep_alive_connection_is_reused():
    # The first finished connection is looked at (PROBE_S, 1 ms) before it is reused, in case the server
    # closes after answering; the next request waits for that look rather than dial a second one.
    records, _, opened = run(one(Script(ttft_s=0.02, itl_s=0.001), n=5))
    assert all(r.status is Status.OK for r in records)
    assert opened == 1
    assert records[0].connect_ns is not None
    assert all(r.connect_ns is None for r in records[1:])


def test_a_closed_loops_users_keep_one_connection_each_across_the_first_wave():
    """16 users whose requests end together: each next request waits for the first keep-alive look
    and reuses a finished connection, so the run holds 16 connections, not one more per user."""

    async def go() -> tuple[list[RequestRecord], int]:
        async with ScriptedServer(Script(ttft_s=0.02, itl_s=0.001)) as srv:
            sender = Sender(parse_endpoint(srv.url), get_dialect("chat"), "m", Sampling(), True, 5.0)
            records: list[RequestRecord] = []

            async def user(u: int) -> None:
                for i in range(3):
                    r = RequestRecord(f"u{u}-{i}")
                    await sender.send(r, sender.prepare("a b c", 8, r.request_id))
                    records.append(r)

            await asyncio.gather(*(user(u) for u in range(16)))
            opened = sender.connections_opened
            await sender.close()
            return records, opened

    records, opened = run(go())
    assert len(records) == 48 and all(r.status is Status.OK for r in records)
    assert opened == 16
    assert sum(r.connect_ns is not None for r in records) == 16


@pytest.mark.parametrize(
    ("script", "status", "reason"),
    [
        (Script(http_status=500), Status.HTTP_ERROR, "HTTP 500: scripted 500"),
        (Script(http_status=429, retry_after=1), Status.HTTP_ERROR, "HTTP 429"),
        (Script(http_status=404), Status.HTTP_ERROR, "HTTP 404"),
        (Script(close_before_headers=True), Status.STREAM_INTERRUPTED, "before the response headers"),
        (Script(itl_s=0.001, ttft_s=0.001, cut_after=3), Status.STREAM_INTERRUPTED, "mid-stream"),
        (Script(itl_s=0.001, ttft_s=0.001, malformed_after=2), Status.PROTOCOL_ERROR, "malformed JSON"),
        (
            Script(itl_s=0.001, ttft_s=0.001, error_event_after=2),
            Status.STREAM_INTERRUPTED,
            "scripted engine failure",
        ),
        (Script(itl_s=0.001, ttft_s=0.001, stall_after=2), Status.TIMEOUT, "within 0.3s"),
        (Script(ttft_s=2.0), Status.TIMEOUT, "0 token chunks"),
    ],
)
def test_each_failure_is_recorded_with_status_and_reason(script, status, reason):
    (r,), _, _ = run(one(script, timeout_s=0.3))
    assert r.status is status
    assert reason in (r.error or "")
    assert r.end_ns is not None and r.end_ns >= r.sent_ns


def test_stream_ended_without_done_or_finish_reason_is_interrupted():
    # the last chunk carries finish_reason, so a missing [DONE] alone is tolerated ...
    (r,), _, _ = run(one(Script(ttft_s=0.001, itl_s=0.001, send_done=False)))
    assert r.status is Status.OK
    # ... but a body that ends early, with neither, is not
    (r,), _, _ = run(one(Script(ttft_s=0.001, itl_s=0.001, tokens=0, send_done=False, usage=False)))
    assert r.status is Status.STREAM_INTERRUPTED and "[DONE]" in r.error


def test_connection_refused_is_a_connect_error():
    async def go():
        srv = await ScriptedServer().start()
        url = srv.url
        await srv.stop()
        sender = Sender(parse_endpoint(url), get_dialect("chat"), "m", Sampling(), True, 2.0)
        r = RequestRecord("x")
        await sender.send(r, sender.prepare("a", 4, "x"))
        return r

    r = run(go())
    assert r.status is Status.CONNECT_ERROR and "refused" in r.error


def test_sse_variants_decode_the_same():
    script = Script(ttft_s=0.001, itl_s=0.001, crlf=True, comments=True, split_events=True)
    (r,), _, _ = run(one(script))
    assert r.status is Status.OK and r.output_tokens_counted == 8


def test_multi_token_chunks_and_per_chunk_usage():
    script = Script(ttft_s=0.001, itl_s=0.001, tokens=4, tokens_per_chunk=3, continuous_usage=True)
    (r,), _, _ = run(one(script))
    assert r.output_tokens_counted == 4 and r.output_tokens_server == 12
    assert r.chunk_tokens == [3, 3, 3, 3]


def test_reasoning_then_answer():
    (r,), _, _ = run(one(Script(ttft_s=0.001, itl_s=0.002, reasoning_chunks=3)))
    assert r.reasoning_chunks == 3
    assert r.first_token_ns == r.token_ns[0] and r.first_answer_ns == r.token_ns[3]


def test_completions_api_and_no_stream():
    (r,), _, _ = run(one(Script(ttft_s=0.001, itl_s=0.001), api="completions"))
    assert r.status is Status.OK and r.output_tokens_counted == 8
    (r,), _, _ = run(one(Script(ttft_s=0.01, itl_s=0.001), stream=False))
    assert r.status is Status.OK
    assert r.first_token_ns == r.end_ns  # whole answer at once: TTFT equals E2E
    assert r.output_tokens_server == 8 and r.output_tokens_counted == 0


def test_request_id_is_sent_as_header():
    (_r,), srv, _ = run(one(Script(ttft_s=0.001, itl_s=0.001)))
    assert "req-0" in srv.stats.truth


@pytest.mark.parametrize("url", ["ftp://x", "http://", "127.0.0.1:8000", "http://h:99999/v1"])
def test_bad_urls_refused(url):
    with pytest.raises(EndpointError):
        parse_endpoint(url)


def test_url_may_name_the_api_path():
    ep = parse_endpoint("http://127.0.0.1:8000/v1/chat/completions")
    assert ep.path_for("/chat/completions") == "/v1/chat/completions"
    assert parse_endpoint("https://api.example.com/v1/").path_for("/completions") == "/v1/completions"
    assert parse_endpoint("https://api.example.com/v1").host_header == "api.example.com"


def test_tls_to_a_plain_http_server_is_a_connect_error():
    async def go():
        async with ScriptedServer() as srv:
            url = srv.url.replace("http://", "https://")
            sender = Sender(parse_endpoint(url), get_dialect("chat"), "m", Sampling(), True, 2.0)
            r = RequestRecord("x")
            await sender.send(r, sender.prepare("a", 4, "x"))
            await sender.close()
            return r

    r = run(go())
    assert r.status is Status.CONNECT_ERROR and "TLS" in r.error


def test_dns_failure_is_a_connect_error():
    async def go():
        sender = Sender(
            parse_endpoint("http://no-such-host.invalid/v1"), get_dialect("chat"), "m", Sampling(), True, 5.0
        )
        r = RequestRecord("x")
        await sender.send(r, sender.prepare("a", 4, "x"))
        return r

    r = run(go())
    assert r.status is Status.CONNECT_ERROR and "DNS" in r.error
