"""Issue 49, item 1, through the gateway: an upstream that sends a legitimate answer one byte per
HTTP chunk, as fast as it can, is read at the connection's pieces-a-second budget (one second's
burst, then the rate) and its answer arrives whole, recorded ok with every token: it used to get
one turn's share a second for good once past the budget (26 s for 100 tokens, recorded as a stall
of the upstream). The bound below is liveness only (at 128 pieces a second the answer takes ~3 min)."""

from __future__ import annotations

import asyncio

import aiohttp

from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.fuzz_peers import FuzzUpstream, Peer
from tokenpace.wire.http1 import client as kernel

PEER = Peer(tokens=400, chunks=(1,))  # ~23,000 one-byte HTTP chunks: past one second's budget


def test_a_peer_of_one_byte_chunks_is_read_at_the_budget_and_its_answer_arrives_whole() -> None:
    records: list[RequestRecord] = []
    pieces = len(PEER.body())
    assert pieces > kernel.PIECES_PER_SECOND  # the answer needs the budget's refill

    async def main() -> bytes:
        async with FuzzUpstream() as up:
            up.peers["bytes"] = PEER
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0, stall_timeout_s=5.0)
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                chat = {"model": "bytes", "messages": [{"role": "user", "content": "hi"}], "stream": True}
                async with s.post(gw.url + "/v1/chat/completions", json=chat) as r:
                    body = await r.read()
                for _ in range(100):
                    if records:
                        break
                    await asyncio.sleep(0.05)
                return body

    body = asyncio.run(asyncio.wait_for(main(), 60))
    assert body.endswith(b"data: [DONE]\n\n") and body.count(b"data: {") == PEER.tokens
    (rec,) = records
    assert rec.status is Status.OK and rec.labels["outcome"] == "ok", rec.error
    assert rec.output_tokens_counted == PEER.tokens
