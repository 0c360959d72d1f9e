"""Hostile clients next to healthy ones: slow, idle and half-sent connections are closed by the
gateway's timeouts, extra connections are refused, garbage gets a plain 400 and one log line per
kind, and all of it is counted in /metrics. Secrets sent in bad requests reach no log and no answer."""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
import pytest

from gateway.hostile_upstream import HEALTHY, HostileUpstream
from gateway.request_path.test_gateway_hostile import SECRET, check_logs, metrics_text, stream
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.ratelog import RateLimitedLog

LIVENESS_S = 5.0


def counter(text: str, name: str, reason: str) -> float:
    m = re.search(rf'^{name}{{reason="{reason}"}} (\S+)$', text, re.M)
    assert m, (name, reason)
    return float(m.group(1))


async def raw(port: int, data: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if data:
        writer.write(data)
        await writer.drain()
    return reader, writer


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the gateway sent before it closed the connection (bounded: liveness only)."""
    return await asyncio.wait_for(reader.read(), LIVENESS_S)


def run_gateway(body, **cfg: object) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        async with HostileUpstream() as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0, **cfg)  # type: ignore[arg-type]
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                await body(gw, s)

    asyncio.run(asyncio.wait_for(main(), 30))


CHAT_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"


def test_slow_and_idle_connections_are_closed_and_a_healthy_stream_still_works(caplog) -> None:
    caplog.set_level(logging.DEBUG)

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> None:
        silent = [await raw(gw.port, b"") for _ in range(15)]
        half_head = [
            await raw(gw.port, CHAT_HEAD + b"Authorization: Bearer " + SECRET.encode()) for _ in range(15)
        ]
        half_body = [
            await raw(gw.port, CHAT_HEAD + b'Content-Length: 100\r\n\r\n{"model"') for _ in range(15)
        ]
        kept = await raw(gw.port, b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")  # then kept alive, idle
        got, broke = await stream(s, gw.url, "healthy")  # meanwhile, a healthy stream
        assert got == b"".join(HEALTHY) and not broke
        for reader, _ in silent:
            assert await until_closed(reader) == b""
        for reader, _ in half_head:
            answer = await until_closed(reader)
            assert answer.startswith(b"HTTP/1.1 408") and SECRET.encode() not in answer
        for reader, _ in half_body:
            assert (await until_closed(reader)).startswith(b"HTTP/1.1 408")
        assert b"HTTP/1.1 200" in await until_closed(kept[0])  # answered, then closed when idle
        text = await metrics_text(s, gw.url)
        assert counter(text, "tokenpace_gateway_connections_closed_total", "header_timeout") == 30
        assert counter(text, "tokenpace_gateway_connections_closed_total", "body_timeout") == 15
        assert counter(text, "tokenpace_gateway_connections_closed_total", "idle_timeout") >= 1
        got, broke = await stream(s, gw.url, "healthy")  # and afterwards
        assert got == b"".join(HEALTHY) and not broke
        for _, writer in silent + half_head + half_body + [kept]:
            writer.close()

    run_gateway(body, header_timeout_s=0.3, body_timeout_s=0.3, idle_timeout_s=0.3)
    check_logs(caplog)
    lines = [r.getMessage() for r in caplog.records if r.name == "tokenpace.gateway"]
    assert sum("header timeout" in line for line in lines) == 1  # one line per kind per 10 s


def test_connections_past_the_limit_are_refused_then_served_again() -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> None:
        held = [await raw(gw.port, b"") for _ in range(4)]

        async def accepted() -> None:
            while gw.gateway.guard.open < 4:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(accepted(), LIVENESS_S)
        extra, _ = await raw(gw.port, b"")
        answer = await until_closed(extra)
        assert answer.startswith(b"HTTP/1.1 503") and b"too many open connections" in answer
        for reader, _ in held:  # the header timeout frees the slots
            assert await until_closed(reader) == b""
        got, broke = await stream(s, gw.url, "healthy")
        assert got == b"".join(HEALTHY) and not broke
        text = await metrics_text(s, gw.url)
        assert counter(text, "tokenpace_gateway_connections_closed_total", "max_connections") >= 1
        for _, writer in held:
            writer.close()

    run_gateway(body, header_timeout_s=0.5, max_connections=4)


GARBAGE = [
    (b"GARBAGE\r\n\r\n", "bad_method"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "bad_method"),  # TLS on the plain port
    (b"GET /\x01 HTTP/1.1\r\n\r\n", "bad_url"),
    (
        b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + SECRET.encode() + b"\rInjected: 1\r\n\r\n",
        "bad_header",
    ),
    (b"GET / HTTP/1.1\r\nAuthorization: Bearer " + SECRET.encode() + b"\r\nX\x00: 1\r\n\r\n", "bad_header"),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", "line_too_long"),
    (b"GET / HTTP/9.9 " + SECRET.encode() + b"\r\n\r\n", "bad_request_line"),
    (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "malformed_http",
    ),
]


def test_garbage_gets_a_plain_400_one_log_line_per_kind_and_counts(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    rounds = 20

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> None:
        async def bad(data: bytes) -> bytes:
            reader, writer = await raw(gw.port, data)
            try:
                return await until_closed(reader)
            finally:
                writer.close()

        healthy = [stream(s, gw.url, "healthy") for _ in range(3)]
        results = await asyncio.gather(*(bad(d) for _ in range(rounds) for d, _ in GARBAGE), *healthy)
        for answer in results[: rounds * len(GARBAGE)]:
            assert isinstance(answer, bytes)
            assert answer.startswith(b"HTTP/1.1 400") or answer.startswith(b"HTTP/1.0 400"), answer[:40]
            assert SECRET.encode() not in answer and b"Injected" not in answer
        for got, broke in results[rounds * len(GARBAGE) :]:
            assert got == b"".join(HEALTHY) and not broke
        text = await metrics_text(s, gw.url)
        for reason in {r for _, r in GARBAGE}:
            expected = rounds * sum(r == reason for _, r in GARBAGE)
            assert counter(text, "tokenpace_gateway_rejected_requests_total", reason) == expected, reason

    run_gateway(body)
    check_logs(caplog)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(("tokenpace", "aiohttp"))]
    assert len(lines) == len({r for _, r in GARBAGE})  # one per kind, whatever the flood
    assert all("answered 400 to 127.0.0.1" in line for line in lines)


def test_rate_limited_log_says_how_many_lines_it_held_back(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="tokenpace.gateway")
    now = [100.0]
    log = RateLimitedLog(window_s=10.0, clock=lambda: now[0])
    assert log("bad_header", "x") is True
    for _ in range(5):
        now[0] += 1.0
        assert log("bad_header", "x") is False
    assert log("bad_url", "y") is True  # another kind has its own window
    now[0] += 10.0
    assert log("bad_header", "x") is True
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "tokenpace gateway: x",
        "tokenpace gateway: y",
        "tokenpace gateway: x (5 more of this kind in the last 10 s not logged)",
    ]


@pytest.mark.parametrize("with_keys", [False, True])
def test_bodies_the_gateway_refuses_are_counted(with_keys: bool) -> None:
    key = "client-key-123"

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> None:
        url = gw.url + "/v1/chat/completions"
        auth = {"Authorization": f"Bearer {key}"} if with_keys else {}
        for data, status in ((b"{not json", 400), (b"[1]", 400), (b"x" * 5000, 413)):
            async with s.post(url, data=data, headers=auth) as r:
                assert r.status == status
        if with_keys:
            async with s.post(url, data=b"{}") as r:
                assert r.status == 401
        text = await metrics_text(s, gw.url)
        name = "tokenpace_gateway_rejected_requests_total"
        assert counter(text, name, "body_not_json") == 1
        assert counter(text, name, "body_not_object") == 1
        assert counter(text, name, "body_too_large") == 1
        assert counter(text, name, "unauthorized") == (1 if with_keys else 0)

    run_gateway(body, max_body_bytes=4096, client_keys=frozenset({key}) if with_keys else frozenset())


def test_an_internal_error_is_a_plain_500_counted_and_logged_once_without_details(
    caplog, monkeypatch
) -> None:
    from tokenpace.gateway.request_path.proxy import Gateway

    async def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError(f"bug holding {SECRET}")

    monkeypatch.setattr(Gateway, "_forward", broken)
    caplog.set_level(logging.DEBUG)

    async def body(gw: RunningGateway, s: aiohttp.ClientSession) -> None:
        for _ in range(5):
            async with s.get(gw.url + "/v1/models") as r:
                assert r.status == 500 and SECRET not in await r.text()
        text = await metrics_text(s, gw.url)
        assert counter(text, "tokenpace_gateway_rejected_requests_total", "internal_error") == 5
        assert "tokenpace_gateway_requests_in_flight 0.0" in text  # nothing left counted in flight

    run_gateway(body)
    check_logs(caplog)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(("tokenpace", "aiohttp"))]
    assert lines == ["tokenpace gateway: answered 500 to 127.0.0.1: internal error"]
