"""Issue 38, the last open part: twenty hostile upstream peers at once (one byte per HTTP chunk;
a BOM, CR-only line ends and 7/3-byte chunks; a comment flood; a cut) beside healthy streams through
one gateway. The upstream side's parsing work in any one loop turn, all connections together, stays
within the loop's budget (``UNITS_PER_TURN``; the per-connection budgets let twenty peers take twenty
budgets a turn), every request has exactly one record, and every failed one says why."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gateway.operations.test_gateway_fuzz import _healthy, _hostile, _record_of
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.fuzz_peers import HEALTHY_MODEL, FuzzUpstream, Peer
from tokenpace.wire.http1.client import ResponseConnection
from tokenpace.wire.http1.turn_budget import UNITS_PER_TURN

HOSTILE = {
    "bytes": Peer(tokens=100, chunks=(1,)),
    "bom-cr": Peer(tokens=100, bom=True, line_end=b"\r", chunks=(7, 3)),
    "comments": Peer(tokens=5, comments=5000, chunks=(3,)),
    "cut": Peer(tokens=50, pad=100, cut_after=3000, chunks=(2,)),
}
PEERS = 20
HEALTHY_STREAMS = 6


class CountingLoop(asyncio.SelectorEventLoop):
    """Notes the parsing units of the gateway's upstream connections in each of its turns."""

    def __init__(self) -> None:
        super().__init__()
        self.units = 0
        self.busiest = 0

    def _run_once(self) -> None:
        super()._run_once()  # type: ignore[misc]
        self.busiest = max(self.busiest, self.units)
        self.units = 0


def _counting(method: Any) -> Any:
    def counted(self: ResponseConnection, *args: Any) -> Any:
        asyncio.get_running_loop().units += 1  # type: ignore[attr-defined]
        return method(self, *args)

    return counted


def test_twenty_hostile_peers_share_one_turns_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ResponseConnection, "on_body", _counting(ResponseConnection.on_body))
    monkeypatch.setattr(
        ResponseConnection, "on_headers_complete", _counting(ResponseConnection.on_headers_complete)
    )
    records: list[RequestRecord] = []

    async def main() -> list[int]:
        async with FuzzUpstream() as up:
            up.peers.update(HOSTILE)
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={up.url}"),),
                port=0,
                first_token_timeout_s=10.0,
                stall_timeout_s=5.0,
            )
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                models = [list(HOSTILE)[i % len(HOSTILE)] for i in range(PEERS)]
                got = await asyncio.gather(
                    *(_hostile(s, gw.url, m) for m in models),
                    *(_healthy(s, gw.url) for _ in range(HEALTHY_STREAMS)),
                )
                async with s.get(gw.admin_url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
                    assert r.status == 200
                return [g for g in got if isinstance(g, int)]

    loop = CountingLoop()
    try:
        statuses = loop.run_until_complete(asyncio.wait_for(main(), 90))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
    busiest = loop.busiest
    assert len(statuses) == PEERS
    assert 0 < busiest <= UNITS_PER_TURN  # main: ~20 x 683 units in one turn
    for model in HOSTILE:  # one record per request, each failure with its reason
        mine = _record_of(records, model)
        assert len(mine) == PEERS // len(HOSTILE), model
        for rec in mine:
            if rec.status is not Status.OK:
                assert rec.error, (model, rec.status)
            assert rec.labels["outcome"] != "internal_error", rec.error
    assert all(rec.status is not Status.OK for rec in _record_of(records, "cut"))
    healthy = _record_of(records, HEALTHY_MODEL)
    assert len(healthy) == HEALTHY_STREAMS and all(r.status is Status.OK for r in healthy)
