"""A gray release stored by a real gateway, for the arms-over-time tests (report and console): arms
a and b behind one scripted upstream, 200 users at a=90/b=10, the split moved live to 50/50, 200
users more, and a complaint reported for every tenth request."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from tokenpace.adapters.store import Store
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
KEY = "k"
SESSION = "sess1"


async def _users(s: aiohttp.ClientSession, url: str, tag: str, n: int) -> list[str]:
    async def one(i: int) -> str:
        async with s.post(url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": f"{tag}-{i}"}) as r:
            assert r.status == 200
            await r.read()
            return r.headers.get("x-request-id", "")

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def store_rollout(store: Store) -> float:
    """The rollout stored in ``store``; returns a time just before it began (unix s)."""
    started = time.time() - 1

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.002, itl_s=0.001)) as up:
            ups = (parse_upstream(f"a={up.url},weight=90"), parse_upstream(f"b={up.url},weight=10"))
            config = GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))
            writer = StoreRecordWriter(store, config, SESSION)
            async with RunningGateway(config, writer=writer) as gw, aiohttp.ClientSession() as s:
                ids = await _users(s, gw.url, "before", 200)
                move = {"weights": {"a": 50, "b": 50}, "by": "a test"}
                headers = {"Authorization": f"Bearer {KEY}"}
                async with s.post(gw.admin_url + "/tokenpace/config", json=move, headers=headers) as r:
                    assert r.status == 200
                ids += await _users(s, gw.url, "after", 200)
                events = [{"request_id": rid, "event": "complaint"} for rid in ids[::10] if rid]
                async with s.post(
                    gw.admin_url + "/tokenpace/events", data=orjson.dumps(events), headers=headers
                ) as r:
                    assert r.status == 200

    asyncio.run(main())
    return started
