"""The one keep-alive pool and its one resend rule, as the gateway's upstream side uses it."""

from __future__ import annotations

import asyncio

import pytest

from tokenpace.testing.wire_upstream import ClosingRace, WireUpstream
from tokenpace.wire import pool as pool_module
from tokenpace.wire.endpoint import parse_endpoint
from tokenpace.wire.exchange import ExchangeError
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
        pool.keepalive.known = True
        first = await one(pool, post(pool, "m"))
        monkeypatch.setattr(pool_module, "look_before_send", race.look)
        second = await one(pool, post(pool, "m"))
        pool.close()
        return [first, second]

    with ClosingRace() as race:
        assert asyncio.run(asyncio.wait_for(go(race), 10)) == [200, 200]
    assert len(race.posts) == 2  # the first request, and the second once
