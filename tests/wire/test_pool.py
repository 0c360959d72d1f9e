"""The one keep-alive pool and its one resend rule, as the gateway's upstream side uses it."""

from __future__ import annotations

import asyncio

import pytest

from tokenpace.testing.wire_upstream import ClosingRace, WireUpstream
from tokenpace.wire import pool as pool_module
from tokenpace.wire.endpoint import parse_endpoint
from tokenpace.wire.exchange import ExchangeError
from tokenpace.wire.keepalive import GATEWAY_LOOK_S
from tokenpace.wire.pool import Pool
from tokenpace.wire.request import request_bytes, request_head


def post(pool: Pool, model: str) -> bytes:
    head = request_head("POST", "/v1/chat/completions", pool.endpoint.host_header, [])
    return request_bytes(head, b'{"model":"%b"}' % model.encode())


async def one(pool: Pool, payload: bytes) -> int:
    conn, ex = await pool.request(payload, head_only=False, connect_timeout_s=5)
    await ex.done
    pool.release(conn)
    await asyncio.sleep(0.02)  # past the keep-alive look
    return ex.status


def test_a_request_the_upstream_read_on_a_reused_connection_is_never_sent_again() -> None:
    async def go() -> tuple[list[object], WireUpstream]:
        async with WireUpstream() as up:
            pool = Pool(parse_endpoint(up.url))
            got: list[object] = []
            for _ in range(3):
                try:
                    got.append(await one(pool, post(pool, "read-drop")))
                except ExchangeError as exc:
                    got.append(str(exc))
            pool.close()
            return got, up

    got, up = asyncio.run(asyncio.wait_for(go(), 10))
    assert got[0] == 200 and got[2] == 200
    assert "on a reused keep-alive connection" in str(got[1]) and "not resent" in str(got[1])
    assert up.read["read-drop"] == 3  # three requests, each read once: nothing twice
    assert up.connections == 2


def test_a_request_the_upstream_never_received_is_resent_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream closes its idle connection between the pool's look and the write: its TCP never
    acknowledges the request, so it is sent again on a new connection and read exactly once."""

    async def go(race: ClosingRace) -> list[int]:
        pool = Pool(parse_endpoint(race.url))
        for chunked in (True, False):  # as if the server had kept a connection open before
            pool.keepalive.judge(chunked, closed_after_answering=False, look_s=pool.look_s)
        first = await one(pool, post(pool, "m"))
        monkeypatch.setattr(pool_module, "look_before_send", race.look)
        second = await one(pool, post(pool, "m"))
        pool.close()
        return [first, second]

    with ClosingRace() as race:
        assert asyncio.run(asyncio.wait_for(go(race), 10)) == [200, 200]
    assert len(race.posts) == 2  # the first request, and the second once


def gateway_pool(url: str) -> Pool:
    return Pool(parse_endpoint(url), look_s=GATEWAY_LOOK_S, wait_for_look=False)


async def answered(pool: Pool, model: str) -> int | str:
    """One request, released at once (no pause for the look): its status, or why it failed."""
    try:
        conn, ex = await pool.request(post(pool, model), head_only=False, connect_timeout_s=5)
    except ExchangeError as exc:
        return str(exc)
    await ex.done
    pool.release(conn)
    return ex.status


def test_a_server_closing_late_after_a_stream_costs_the_gateway_no_request() -> None:
    """The server closes a few ms after each streamed (chunked) response, as llama.cpp's server
    does behind a busy proxy; whole responses keep the connection. A request that comes right
    after a stream dials instead of meeting the closing connection; the look learns each kind apart,
    so whole responses' connections are still reused and streams' are not."""

    async def go() -> tuple[list[int | str], Pool, WireUpstream]:
        async with WireUpstream() as up:
            pool = gateway_pool(up.url)
            got = [await answered(pool, "healthy")]
            await asyncio.sleep(2 * GATEWAY_LOOK_S)
            for _ in range(3):
                got.append(await answered(pool, "late-close"))
                got.append(await answered(pool, "healthy"))  # straight after the stream
                await asyncio.sleep(2 * GATEWAY_LOOK_S)
            pool.close()
            return got, pool, up

    got, pool, up = asyncio.run(asyncio.wait_for(go(), 10))
    assert got == [200] * 7
    assert pool.keepalive.closes_after == {False: False, True: True}
    assert pool.keepalive.reuse  # reuse was not given up: whole responses still share connections
    assert sum(up.read.values()) == 7  # each request read once
    assert up.connections == 4  # the first whole response's connection, and one per stream


def test_the_gateway_dials_during_a_look_and_the_client_waits_for_it() -> None:
    async def go(wait: bool) -> int:
        async with WireUpstream() as up:
            pool = Pool(parse_endpoint(up.url), look_s=GATEWAY_LOOK_S, wait_for_look=wait)
            assert await answered(pool, "healthy") == 200
            assert await answered(pool, "healthy") == 200  # during the first look
            pool.close()
            return up.connections

    assert asyncio.run(go(wait=False)) == 2
    assert asyncio.run(go(wait=True)) == 1


def test_a_reused_connection_dropped_unanswered_stops_the_gateways_reuse() -> None:
    """Once a request was lost on a reused connection (and could not be resent), the pool dials a
    new connection for every later request rather than risk another client's request."""

    async def go() -> tuple[list[int | str], Pool, WireUpstream]:
        async with WireUpstream() as up:
            pool = gateway_pool(up.url)
            got = []
            for _ in range(4):
                got.append(await answered(pool, "read-drop"))
                await asyncio.sleep(2 * GATEWAY_LOOK_S)
            pool.close()
            return got, pool, up

    got, pool, up = asyncio.run(asyncio.wait_for(go(), 10))
    assert got[0] == 200 and "not resent" in str(got[1]) and got[2:] == [200, 200]
    assert not pool.keepalive.reuse and "dropped a request on a reused" in str(pool.keepalive.stopped)
    assert up.connections == 3  # the fourth request did not meet the third's connection again
