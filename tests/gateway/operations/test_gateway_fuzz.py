"""The fuzzer (issue 38): hypothesis draws hostile peers and the bounds are asserted on each.

A short budget runs here (a few examples per property, no deadline: two busy cores); the long run is
``benchmarks/gateway_fuzz.py``. Pure properties first (the SSE parser, the HTTP/1.1 kernel's work
per turn, the WebSocket mask watch), then the gateway itself: a drawn hostile upstream stream
(bytes per HTTP chunk down to one, BOMs, CR-only line ends, comment floods, gzip, cuts) beside
healthy streams, asserting one record per request with a reason, healthy streams byte for byte,
/metrics answering, and the process's peak RSS growth bounded.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import aiohttp
import pytest

hypothesis = pytest.importorskip("hypothesis")
import fuzz_strategies  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tokenpace.core.record import RequestRecord, Status  # noqa: E402
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream  # noqa: E402
from tokenpace.gateway.lifecycle.serve import RunningGateway  # noqa: E402
from tokenpace.gateway.observability.prom import MAX_LABEL_BYTES, ModelLabels  # noqa: E402
from tokenpace.testing.fuzz_peers import HEALTHY, HEALTHY_MODEL, FuzzUpstream, Peer  # noqa: E402
from tokenpace.wire.http1 import client as kernel  # noqa: E402
from tokenpace.wire.sse import SseParser  # noqa: E402
from tokenpace.wire.websocket import MaskWatch  # noqa: E402

SHORT = settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
RSS_GROWTH_BOUND_MB = 64  # the whole fuzz run in this process (gateway, upstream and clients)

peers = fuzz_strategies.peers([0, 1, 100, 5000, 70_000])


def _cuts(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i : i + n])
        i, k = i + n, k + 1
    return out


@SHORT
@given(peer=peers.filter(lambda p: not p.gzip), sizes=st.lists(st.integers(1, 97), min_size=1, max_size=5))
def test_sse_parser_reads_any_cut_of_a_stream_as_the_whole(peer: Peer, sizes: list[int]) -> None:
    body = peer.body()
    whole = SseParser().feed(body)
    cut = SseParser()
    got = [p for piece in _cuts(body, sizes) for p in cut.feed(piece)]
    assert got == whole
    assert cut.pending_len <= cut.max_event
    if peer.pad < 1024 * 1024:
        assert cut.error is None and len([p for p in got if p != b"[DONE]"]) == peer.tokens


@SHORT
@given(peer=peers, sizes=st.lists(st.integers(1, 70_000), min_size=1, max_size=4))
def test_the_kernel_bounds_its_work_per_turn_and_delivers_the_body_whole(
    peer: Peer, sizes: list[int]
) -> None:
    """However the response is chunked and read, no turn parses more than the budget of pieces,
    and the body reaches the exchange whole and in order."""

    class Exchange:
        def __init__(self) -> None:
            self.body: list[bytes] = []
            self.ended = self.broken = False

        def response_header(self, *a: Any) -> None: ...
        def response_interim(self) -> None: ...
        def response_head(self, status: int, now: int) -> None: ...
        def response_body(self, data: bytes, now: int) -> None:
            self.body.append(data)

        def response_end(self, now: int) -> None:
            self.ended = True

        def response_lost(self, *a: Any) -> None:
            self.broken = True

        def response_malformed(self, *a: Any) -> None:
            self.broken = True

    class Transport(asyncio.Transport):
        def write(self, data: Any) -> None: ...
        def pause_reading(self) -> None: ...
        def resume_reading(self) -> None: ...
        def abort(self) -> None: ...

    most = 0

    class Counted(kernel.ResponseConnection):
        def on_body(self, body: bytes) -> None:
            nonlocal most
            super().on_body(body)
            most = max(most, self.pieces)

    async def main() -> Exchange:
        conn, ex = Counted(), Exchange()
        conn.connection_made(Transport())
        conn.start(ex, b"")  # type: ignore[arg-type]
        for piece in _cuts(peer.wire(), sizes):
            while conn.backlog is not None:  # reading is paused: nothing more arrives meanwhile
                await asyncio.sleep(0)
            conn.data_received(piece)
        for _ in range(10_000):
            if conn.backlog is None:
                break
            await asyncio.sleep(0)
        conn.connection_lost(None)
        return ex

    ex = asyncio.run(main())
    assert most <= kernel.PIECES_PER_TURN
    wire_body = peer.body()[: peer.cut_after] if peer.cut_after is not None else peer.body()
    assert b"".join(ex.body) == wire_body
    assert ex.ended == peer.ends_well or (peer.cut_after is not None and ex.broken)


frames = st.lists(
    st.tuples(st.booleans(), st.sampled_from([0, 1, 125, 126, 300, 65535, 65536, 70_000])),
    min_size=1,
    max_size=6,
)


@SHORT
@given(shape=frames, sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=4))
def test_mask_watch_stops_right_before_the_first_unmasked_frame(
    shape: list[tuple[bool, int]], sizes: list[int]
) -> None:
    stream, first_bad = b"", None
    for masked, n in shape:
        if not masked and first_bad is None:
            first_bad = len(stream)
        if n < 126:
            size = bytes((n,))
        elif n < 65536:
            size = bytes((126,)) + n.to_bytes(2, "big")
        else:
            size = bytes((127,)) + n.to_bytes(8, "big")
        size = bytes((size[0] | (0x80 if masked else 0),)) + size[1:]
        stream += b"\x82" + size + (b"\x01\x02\x03\x04" if masked else b"") + b"p" * n
    watch, passed, bad = MaskWatch(), b"", False
    for piece in _cuts(stream, sizes):
        ok, bad = watch.scan(piece)
        passed += ok
        if bad:
            break
    if first_bad is None:
        assert not bad and passed == stream
    else:
        assert bad and passed == stream[:first_bad]


async def _healthy(s: aiohttp.ClientSession, url: str) -> bytes:
    chat = {"model": HEALTHY_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with s.post(url + "/v1/chat/completions", json=chat) as r:
        return await r.read()


async def _hostile(s: aiohttp.ClientSession, url: str, model: str) -> int:
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    try:
        async with s.post(url + "/v1/chat/completions", json=chat) as r:
            await r.read()
            return r.status
    except aiohttp.ClientError:  # a cut stream is cut towards the client too
        return -1


def _record_of(records: list[RequestRecord], model: str) -> list[RequestRecord]:
    return [r for r in records if r.labels.get("model") == model]


@settings(SHORT, max_examples=8)
@given(peer=peers)
def test_the_gateway_beside_a_drawn_hostile_upstream(peer: Peer) -> None:
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    records: list[RequestRecord] = []

    async def main() -> tuple[list[bytes], float]:
        async with FuzzUpstream() as up:
            up.peers["fuzz"] = peer
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={up.url}"),),
                port=0,
                first_token_timeout_s=5.0,
                stall_timeout_s=2.0,
            )
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                got = await asyncio.gather(
                    _hostile(s, gw.url, "fuzz"), *(_healthy(s, gw.url) for _ in range(3))
                )
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                async with s.get(gw.admin_url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
                    assert r.status == 200
                    await r.read()
                return list(got[1:]), loop.time() - t0  # type: ignore[arg-type]

    healthy, _metrics_s = asyncio.run(asyncio.wait_for(main(), 60))
    expected = HEALTHY.wire().split(b"\r\n\r\n", 1)[1]
    assert all(len(h) > 0 for h in healthy)
    assert all(b"[DONE]" in h for h in healthy), expected[:0]
    (rec,) = _record_of(records, "fuzz")  # one record per request
    assert len(_record_of(records, HEALTHY_MODEL)) == 3
    assert all(r.status is Status.OK for r in _record_of(records, HEALTHY_MODEL))
    if peer.past_the_end:  # bytes after the end of the gzip data: refused, blamed on the upstream
        assert rec.labels["outcome"] == "protocol_error" and "after the end" in (rec.error or ""), rec.error
    if rec.status is not Status.OK:
        assert rec.error, rec.status  # never a failure without its reason
    else:
        assert peer.ends_well
    assert rec.labels["outcome"] != "internal_error", rec.error
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0
    assert grown < RSS_GROWTH_BOUND_MB


@SHORT
@given(names=st.lists(st.text(min_size=1, max_size=3000), min_size=1, max_size=40, unique=True))
def test_model_labels_are_bounded_in_size_and_count_whatever_clients_send(names: list[str]) -> None:
    """Issue 49: label values come from requests; each is at most MAX_LABEL_BYTES, the slots cap
    their number, and two names that differ keep apart while they have slots."""
    labels = ModelLabels({"declared"}, limit=32)
    got = [labels(n) for n in names]
    assert all(len(v.encode("utf-8", "surrogatepass")) <= MAX_LABEL_BYTES for v in got)
    assert len(set(got) - {"other", "declared"}) <= 32
    slotted = [(n, v) for n, v in zip(names, got, strict=True) if v not in ("other", "declared")]
    assert len({v for _, v in slotted}) == len(slotted)
