"""Optional OTLP traces: a span per generation request with its hops (upstream first byte, first
token, last token) as events, and its own hops as child spans (admission, route, the upstream call
with its connect and wait, relay), the upstream call's span sent upstream as the parent."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import aiohttp
import pytest
from aiohttp import web

from gateway.conftest import TracedGateway
from gateway.request_path.test_gateway import CHAT, FixedUpstream
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.hop_spans import CHILD_SPANS, REUSED, UPSTREAM_SPAN
from tokenpace.gateway.observability.otlp import FIRST_TOKEN_EVENT
from tokenpace.wire.keepalive import GATEWAY_LOOK_S

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")


def test_span_per_request_with_first_token_event_and_no_content(traced_gateway: TracedGateway) -> None:
    async def main() -> None:
        async with traced_gateway.serving() as (gw, _), aiohttp.ClientSession() as s:
            async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                await r.read()
            async with s.get(gw.url + "/v1/models") as r:  # not a generation: no span
                await r.read()

    asyncio.run(asyncio.wait_for(main(), 30))
    (rec,) = traced_gateway.records
    spans = traced_gateway.spans()
    (span,) = [s for s in spans if s.parent is None]  # the gateway's own; the rest are its hops
    assert span.name == "chat m"
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "m"
    assert attrs["tokenpace.outcome"] == "ok" and attrs["gen_ai.usage.output_tokens"] == 7
    assert attrs["tokenpace.request_id"] == rec.request_id
    names = [e.name for e in span.events]
    assert names == ["upstream first byte", FIRST_TOKEN_EVENT, "last token"]  # in time order
    stamps = [span.start_time] + [e.timestamp for e in span.events] + [span.end_time]
    assert all(t is not None for t in stamps)
    assert stamps == sorted(stamps)  # type: ignore[type-var]  # every hop inside the span, in order
    event = span.events[1]
    off = span.start_time - rec.sent_ns  # type: ignore[operator]
    assert event.timestamp == rec.first_token_ns + off  # type: ignore[operator]
    assert span.events[2].timestamp == rec.token_ns[-1] + off  # type: ignore[operator]
    assert span.parent is None and span.context.trace_id == int(rec.trace_id or "0", 16)  # a root
    ttft = (rec.first_token_ns - rec.sent_ns) / 1e9  # type: ignore[operator]
    assert event.attributes["gen_ai.server.time_to_first_token"] == pytest.approx(ttft)  # type: ignore[index]
    text = repr(attrs) + repr(dict(event.attributes or {}))
    assert "secret prompt" not in text and "Hello" not in text


def test_the_gateways_hops_are_child_spans_and_the_upstream_call_is_the_engines_parent(
    traced_gateway: TracedGateway,
) -> None:
    async def main() -> list[dict[str, str]]:
        async with traced_gateway.serving() as (gw, up), aiohttp.ClientSession() as s:
            for _ in range(2):  # one after the other: the second reuses the connection
                async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                    await r.read()
                await asyncio.sleep(2 * GATEWAY_LOOK_S)  # the pool's look at a new server's keep-alive
        return up.seen_headers

    seen = asyncio.run(asyncio.wait_for(main(), 30))
    records, spans = traced_gateway.records, traced_gateway.spans()
    assert len(records) == 2 and len(spans) == 2 * (1 + len(CHILD_SPANS))
    for rec, headers in zip(records, seen, strict=True):
        mine = [s for s in spans if s.context.trace_id == int(rec.trace_id or "0", 16)]
        by_name = {s.name: s for s in mine}
        gateway = by_name["chat m"]
        assert sorted(by_name) == sorted(["chat m", *CHILD_SPANS])
        call = by_name[UPSTREAM_SPAN]
        parents = {n: s.parent.span_id for n, s in by_name.items() if s.parent is not None}
        own = gateway.context.span_id
        assert parents == {
            **{n: own for n in ("admission", "route", UPSTREAM_SPAN, "relay")},
            **{n: call.context.span_id for n in ("connect", "upstream wait")},
        }
        assert call.kind.name == "CLIENT" and gateway.kind.name == "SERVER"
        # the upstream was told the upstream call's span as its parent (W3C: the caller's span)
        assert headers["traceparent"] == f"00-{rec.trace_id}-{call.context.span_id:016x}-01"
        # each inside the gateway's span; in order: admission, route, connect, wait, first byte
        for s in mine:
            assert gateway.start_time <= s.start_time <= s.end_time <= gateway.end_time, s.name
        seq = [by_name[n] for n in ("admission", "route", "connect", "upstream wait")]
        assert all(a.end_time <= b.start_time for a, b in itertools.pairwise(seq))
        assert by_name["upstream wait"].end_time == by_name["relay"].start_time  # the first byte
        assert call.end_time <= by_name["relay"].end_time and call.status.is_ok
    reused = [dict(s.attributes or {})[REUSED] for s in spans if s.name == "connect"]
    assert reused == [False, True]  # dialled, then the kept-alive connection: a span either way


def test_spans_reach_an_otlp_http_collector() -> None:
    async def main() -> list[tuple[str, str, int]]:
        got: list[tuple[str, str, int]] = []

        async def collect(request: web.Request) -> web.Response:
            got.append((request.path, request.content_type, len(await request.read())))
            return web.Response(body=b"", content_type="application/x-protobuf")

        app = web.Application()
        app.router.add_post("/v1/traces", collect)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with FixedUpstream() as up:
                config = GatewayConfig(
                    upstreams=(parse_upstream(f"up={up.url}"),),
                    port=0,
                    otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces",
                )
                async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                    for _ in range(3):
                        async with s.post(gw.url + "/v1/chat/completions", json=CHAT) as r:
                            await r.read()
        finally:
            await runner.cleanup()
        return got

    got = asyncio.run(asyncio.wait_for(main(), 40))
    assert got and all(p == "/v1/traces" and ct == "application/x-protobuf" and n > 0 for p, ct, n in got)


def test_the_dashboards_ttft_panel_shows_exemplars_and_only_it() -> None:
    from tokenpace.core.metrics import Slo
    from tokenpace.gateway.observability.grafana import dashboard

    panels = dashboard(Slo(ttft_ms=800))["panels"]
    ttft = next(p for p in panels if p["title"] == "TTFT (gateway)")
    assert ttft["targets"] and all(t["exemplar"] is True for t in ttft["targets"])  # P50/P95/P99 -> traces
    assert not any(t.get("exemplar") for p in panels if p is not ttft for t in p.get("targets", []))


class _HangingCollector:
    """Accepts connections and reads, never answers: a collector that hangs."""

    async def __aenter__(self) -> str:
        self.conns: list[asyncio.StreamWriter] = []

        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.conns.append(writer)
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass

        self.server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1/traces"

    async def __aexit__(self, *exc: object) -> None:
        for w in self.conns:
            w.close()
        self.server.close()


def test_a_hanging_collector_holds_shutdown_only_to_the_deadline_and_drops_are_counted() -> None:
    """Issue 38, class 6: with a collector that hangs, SIGTERM took 30 s against a 10 s
    --shutdown-timeout, and the spans it dropped were not counted."""
    took: list[float] = []
    dropped: list[int] = []

    async def main() -> None:
        async with _HangingCollector() as endpoint, FixedUpstream() as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={up.url}"),),
                port=0,
                otlp_endpoint=endpoint,
                shutdown_timeout_s=1.0,
            )
            gw = RunningGateway(config)
            await gw.start()
            async with aiohttp.ClientSession() as s:
                for _ in range(3):
                    async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                        await r.read()
            t0 = asyncio.get_running_loop().time()
            await gw.stop()
            took.append(asyncio.get_running_loop().time() - t0)
            dropped.append(gw.gateway.spans_dropped)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert dropped[0] >= 3  # each request's span (and its hops) counted, none confirmed
    assert took[0] < 1.0 + 4.0  # the deadline (1 s) plus slack for a busy host: was 30 s


def test_span_export_close_is_bounded_and_counts_what_it_dropped() -> None:
    from tokenpace.adapters.otlp import SpanExport, SpanOut

    async def main() -> tuple[int, float]:
        async with _HangingCollector() as endpoint:
            export = SpanExport(endpoint, "t")
            for i in range(5):
                export.add(SpanOut("s", "1" * 32, f"{i + 1:016x}", None, 1, 2))
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            n = await asyncio.to_thread(export.close, 0.5)
            return n, loop.time() - t0

    dropped, took = asyncio.run(asyncio.wait_for(main(), 60))
    assert dropped == 5
    assert took < 0.5 + 4.0


def test_bench_waits_for_a_hanging_collector_at_most_its_close_timeout() -> None:
    """Issue 38, class 6: `bench` with a hanging collector took 15 s for a 2 s run."""
    from tokenpace.app.watch.client_traces import export_client_spans
    from tokenpace.core.record import RequestRecord

    def record(i: int) -> RequestRecord:
        rec = RequestRecord(request_id=str(i), scheduled_ns=1, dispatched_ns=1, sent_ns=1)
        rec.trace_id, rec.span_id, rec.trace_sampled, rec.end_ns = "1" * 32, f"{i + 1:016x}", True, 2
        return rec

    async def main() -> tuple[tuple[int, int], float]:
        async with _HangingCollector() as endpoint:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            got = await asyncio.to_thread(
                export_client_spans, [record(i) for i in range(4)], endpoint, "m", 0.5
            )
            return got, loop.time() - t0

    (queued, dropped), took = asyncio.run(asyncio.wait_for(main(), 60))
    assert queued == 4 and dropped == 4
    assert took < 0.5 + 4.0
