"""Issue 49's hostile classes beside 8 healthy streams, run by ``gateway_fuzz.py --issue49``: a peer
of one-byte HTTP chunks (read at the 10,000-pieces-a-second budget: its answer must arrive whole in
under 3 s), 10 streams of tiny events, gzip data followed by 8 MiB more, 250 KB model names, and a
WebSocket ping flood from the upstream's side and from the client's. Bounds (issue 49's acceptance):
healthy TTFT P99 < 3x quiet P99 + 50 ms, slowest /metrics < 1 s, the gateway's peak RSS < 300 MB,
and each hostile request's record blaming the side that made the fault.

The floods are written from prebuilt buffers (kernel copies, no per-frame work here), so this
process's loop, which also times the healthy lanes, is not what is measured.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson

from tokenpace.testing.fuzz_peers import MASKED_PING_BLOCK, Peer

LANES = 8
PEERS = {
    "bpc49": Peer(tokens=400, chunks=(1,)),
    "tiny-events": Peer(tokens=70_000),
    "tiny-chunked": Peer(tokens=70_000, chunks=(58,)),  # each event its own HTTP chunk
    "gzip-trailing": Peer(tokens=50, gzip=True, trailing=8 * 1024 * 1024),
}
# name -> (what the hostile lanes do, how many at once, the outcome their records must have)
CLASSES: dict[str, tuple[str, int, str]] = {
    "one-byte chunks (10,000 pieces/s)": ("http:bpc49", 1, "ok"),
    "tiny-event flood, 10 streams": ("http:tiny-events", 10, "ok"),
    "tiny events one per HTTP chunk, 10 streams": ("http:tiny-chunked", 10, "ok"),
    "gzip, then 8 MiB after its end": ("http:gzip-trailing", 20, "protocol_error"),
    "250 KB model names": ("names", 8, "ok"),
    "WebSocket ping flood from the upstream": ("ws:upstream", 4, "-"),
    "WebSocket ping flood from the client": ("ws:client", 4, "-"),
}


@dataclass
class Hostile:
    done: int = 0
    whole: int = 0
    slowest_s: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)


LONG_NAME = b"m" * 250_000
JSON = {"Content-Type": "application/json"}


def chat_body(model: str, i: int) -> bytes:
    """The request; a "names" lane's model is a new 250 KB name each time, joined from a prebuilt
    buffer (a copy, not an encoding of 250 KB in the loop that also times the healthy lanes)."""
    name = model.encode() if model != "names" else b"%d-" % i + LONG_NAME
    return b'{"model":"' + name + b'","messages":[{"role":"user","content":"x"}],"stream":true}'


async def http_lane(s: aiohttp.ClientSession, url: str, model: str, until: float, out: Hostile) -> None:
    i = 0
    while time.perf_counter() < until:
        body = chat_body(model, i)
        i += 1
        t0, tail = time.perf_counter(), b""
        try:
            async with s.post(url + "/chat/completions", data=body, headers=JSON) as r:
                async for piece in r.content.iter_any():
                    tail = (tail + piece)[-64:]
        except aiohttp.ClientError:
            pass
        out.done += 1
        out.whole += b"[DONE]" in tail
        out.slowest_s = max(out.slowest_s, time.perf_counter() - t0)


async def ws_lane(port: int, side: str, until: float, out: Hostile) -> None:
    """One WebSocket session through the gateway, flooded with pings from ``side``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16))
    query = b"&flood=upstream" if side == "upstream" else b""
    writer.write(
        b"GET /v1/realtime?model=m" + query + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n"
    )
    await reader.readuntil(b"\r\n\r\n")
    try:
        while time.perf_counter() < until:
            if side == "client":
                writer.write(MASKED_PING_BLOCK)
                await writer.drain()
            elif not await asyncio.wait_for(reader.read(65536), 1.0):
                break  # what the gateway relays is read and dropped
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        pass
    out.done += 1
    writer.close()


def hostile_tasks(kind: str, at_once: int, url: str, gw_port: int, until: float, out: Hostile) -> list:
    if kind.startswith("ws:"):
        return [ws_lane(gw_port, kind[3:], until, out) for _ in range(at_once)]
    model = kind.removeprefix("http:")
    conn = aiohttp.TCPConnector(limit=0)
    s = aiohttp.ClientSession(connector=conn, auto_decompress=False)

    async def lanes() -> None:
        async with s:
            await asyncio.gather(*(http_lane(s, url, model, until, out) for _ in range(at_once)))

    return [lanes()]


def tally(records_path: str, offset: int, out: Hostile) -> int:
    """The hostile records written since ``offset``: their outcomes; the new offset."""
    with open(records_path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    for line in data.splitlines():
        labels = orjson.loads(line).get("labels", {})
        if labels.get("model") != "healthy":
            out.outcomes[labels.get("outcome", "?")] += 1
    return offset + len(data)


HEADER = (
    "| class | at once | hostile done (whole) | slowest hostile (s) | healthy TTFT P99 (ms) | bound (ms) "
    "| slowest /metrics (s) | gateway peak RSS (MB) | healthy failed | hostile records' outcomes | holds |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def row(name: str, q99: float, p99: float, metrics_s: float, rss: float, failed: int, out: Hostile) -> str:
    kind, at_once, outcome = CLASSES[name]
    bound = 3 * q99 + 0.050
    blamed = outcome == "-" or set(out.outcomes) == {outcome}
    whole_in_3s = not kind.endswith("bpc49") or (out.whole == out.done and out.slowest_s < 3.0)
    holds = p99 < bound and metrics_s < 1.0 and rss < 300 and not failed and blamed and whole_in_3s
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(out.outcomes.items())) or "none"
    verdict = "yes" if holds else "no"
    return (
        f"| {name} | {at_once} | {out.done} ({out.whole}) | {out.slowest_s:.2f} | {p99 * 1e3:.1f} | "
        f"{bound * 1e3:.1f} | {metrics_s:.3f} | {rss:.0f} | {failed} | {outcomes} | {verdict} |"
    )
