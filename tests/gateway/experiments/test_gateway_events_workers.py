"""With --workers, events reach the parent's one writer; a request another worker served is stored
with arm "unknown" and its id, and the analysis joins it to the stored record: nothing is lost."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from tokenpace.core.analysis.rollout.arms import resolve_events
from tokenpace.core.events import UNKNOWN_ARM, OutcomeEvent
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.workers import WorkerPool
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
N = 30


def test_events_through_workers_are_all_kept_and_joined() -> None:
    items: list = []

    async def main() -> dict:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                workers=2,
                admin_host="127.0.0.1",
                admin_port=0,
            )
            async with WorkerPool(config, writer=items.extend) as pool:
                connector = aiohttp.TCPConnector(force_close=True)  # connections spread over both workers
                async with aiohttp.ClientSession(connector=connector) as s:

                    async def one(i: int) -> str:
                        async with s.post(
                            pool.url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": f"u{i}"}
                        ) as r:
                            await r.read()
                            return r.headers["x-request-id"]

                    ids = await asyncio.gather(*(one(i) for i in range(N)))
                    body = orjson.dumps([{"request_id": rid, "event": "accepted"} for rid in ids])
                    async with s.post(pool.admin_url + "/tokenpace/events", data=body) as r:
                        assert r.status == 200
                        return await r.json()

    answer = asyncio.run(asyncio.wait_for(main(), 90))
    records = [r for r in items if isinstance(r, RequestRecord)]
    events = [e for e in items if isinstance(e, OutcomeEvent)]
    assert len(records) == N and len(events) == N and answer["accepted"] == N
    unknown = sum(1 for e in events if e.arm == UNKNOWN_ARM)
    assert unknown == answer["unknown_request_ids"]
    assert {r.worker for r in records} == {0, 1} and 0 < unknown < N  # worker 1's requests
    joined, unmatched = resolve_events({"a": records}, events)
    assert unmatched == 0 and len(joined) == N and {e.arm for e in joined} == {"a"}
