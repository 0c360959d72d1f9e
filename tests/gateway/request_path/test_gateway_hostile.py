"""Hostile upstreams next to healthy streams through one gateway: the healthy ones come through
byte for byte, /metrics keeps answering, each hostile request is recorded with the right outcome
and reason, and no secret reaches a log, a record, the store or /metrics.
(Hostile clients: test_guard.py.)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from gateway.hostile_upstream import HEALTHY, MALFORMED, ODD, HostileUpstream, odd_stream
from tokenpace.adapters.store import connect
from tokenpace.client import Sender
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import parse_endpoint

SECRET = "sk-SECRET-hostile-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
LIVENESS_S = 5.0  # a bound on "the gateway still answers", not a timing measurement


def chat(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def stream(
    s: aiohttp.ClientSession, url: str, model: str, stop_at: bytes | None = None
) -> tuple[bytes, bool]:
    """The body the client got, and whether its stream broke. ``stop_at``: walk away once seen."""
    got = b""
    try:
        async with s.post(url + "/v1/chat/completions", json=chat(model), headers=AUTH) as r:
            async for piece in r.content.iter_any():
                got += piece
                if stop_at is not None and stop_at in got:
                    return got, False
        return got, False
    except aiohttp.ClientPayloadError:
        return got, True


async def metrics_text(s: aiohttp.ClientSession, url: str) -> str:
    async def get() -> str:
        async with s.get(url + "/metrics") as r:
            assert r.status == 200
            return await r.text()

    return await asyncio.wait_for(get(), LIVENESS_S)


async def wait_records(records: list[RequestRecord], n: int) -> None:
    async def until() -> None:
        while len(records) < n:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(until(), LIVENESS_S)


Body = Callable[[RunningGateway, aiohttp.ClientSession, list[RequestRecord]], Awaitable[None]]


def with_hostile(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, body: Body, **cfg: object
) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    caplog.set_level(logging.DEBUG)
    store = connect(str(tmp_path / "runs.db"))

    async def main() -> None:
        async with HostileUpstream() as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={up.url}"),),
                port=0,
                records_path=str(tmp_path / "records.jsonl"),
                first_token_timeout_s=10.0,
                stall_timeout_s=0.5,
                **cfg,  # type: ignore[arg-type]
            )
            writer = StoreRecordWriter(store, config, "hostile")
            async with RunningGateway(config, writer=writer, on_record=records.append) as gw:
                async with aiohttp.ClientSession(auto_decompress=False) as s:
                    await body(gw, s, records)
                    text = await metrics_text(s, gw.url)
                assert SECRET not in text

    asyncio.run(asyncio.wait_for(main(), 30))
    assert len(store.list_runs()) == 1  # records reached the store ...
    store.close()
    for path in tmp_path.iterdir():  # ... and no secret reached it, nor the JSONL records
        assert SECRET.encode() not in path.read_bytes(), path
    check_logs(caplog)
    return records


def check_logs(caplog: pytest.LogCaptureFixture) -> None:
    """No secret in any line; no traceback from the gateway or its HTTP server."""
    for rec in caplog.records:
        assert SECRET not in rec.getMessage()
        if rec.name.startswith(("tokenpace", "aiohttp")):
            assert rec.exc_info is None and "Traceback" not in rec.getMessage(), rec.getMessage()


def by_model(records: list[RequestRecord], models: list[str]) -> dict[str, RequestRecord]:
    # the model label of each record is the requested model (the upstream has none configured)
    return {r.labels["model"]: r for r in records if r.labels["model"] in models}


def _next_to_healthy(hostile: list[tuple[str, bytes | None]], healthy: int = 3) -> Body:
    """Runs each hostile request with ``healthy`` healthy streams and a /metrics probe beside it."""

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord]) -> None:
        jobs = [stream(s, gw.url, model, stop) for model, stop in hostile]
        jobs += [stream(s, gw.url, "healthy") for _ in range(healthy)]
        jobs.append(metrics_text(s, gw.url))  # type: ignore[arg-type]  # gathered with the streams
        results = await asyncio.gather(*jobs)
        for got, broke in results[len(hostile) : len(hostile) + healthy]:
            assert got == b"".join(HEALTHY) and not broke
        body.results = results[: len(hostile)]  # type: ignore[attr-defined]
        await wait_records(records, len(hostile) + healthy)

    return body


def test_endless_line_and_huge_event_are_cut_healthy_streams_untouched(tmp_path, caplog) -> None:
    body = _next_to_healthy([("endless", None), ("huge", None)])
    records = with_hostile(tmp_path, caplog, body)
    (endless_got, endless_broke), (_, huge_broke) = body.results  # type: ignore[attr-defined]
    assert endless_broke and huge_broke  # the client's stream is cut, never left looking complete
    assert len(endless_got) < 8 * 1024 * 1024  # cut near the bound, not after the upstream's 64 MiB
    recs = by_model(records, ["endless", "huge", "healthy"])
    for model in ("endless", "huge"):
        assert recs[model].status is Status.PROTOCOL_ERROR
        assert recs[model].labels["outcome"] == "protocol_error"
        assert recs[model].error == "event over 1 MiB without a blank line"
    assert recs["healthy"].status is Status.OK and recs["healthy"].output_tokens == 3


def test_dripping_event_is_cut_by_the_stall_timeout_before_and_after_a_token(tmp_path, caplog) -> None:
    body = _next_to_healthy([("drip", None), ("drip0", None)])
    records = with_hostile(tmp_path, caplog, body)
    assert all(broke for _, broke in body.results)  # type: ignore[attr-defined]
    recs = by_model(records, ["drip", "drip0"])
    for model in ("drip", "drip0"):  # drip0 never sent a token: the 10 s first-token timeout did not wait
        assert recs[model].labels["outcome"] == "stall" and recs[model].status is Status.TIMEOUT
        assert recs[model].error == "bytes but no complete event for 0.5 s"
    assert recs["drip"].output_tokens_counted == 1


def test_odd_shapes_pass_through_untouched_as_protocol_errors(tmp_path, caplog) -> None:
    body = _next_to_healthy([(f"odd-{i}", None) for i in range(len(ODD))], healthy=2)
    records = with_hostile(tmp_path, caplog, body)
    for i, (got, broke) in enumerate(body.results):  # type: ignore[attr-defined]
        assert got == b"".join(odd_stream(i)) and not broke, ODD[i]
    recs = by_model(records, [f"odd-{i}" for i in range(len(ODD))])
    # A chunk without "choices" carries no token (servers send usage-only and metadata chunks):
    # read as nothing, as the bench client reads it; the stream itself is fine.
    assert ODD[2] == b'{"delta":"x"}' and recs["odd-2"].labels["outcome"] == "ok"
    for i in (0, 1, 3, 4, 5, 6):
        rec = recs[f"odd-{i}"]
        assert rec.labels["outcome"] == "protocol_error", (ODD[i], rec.labels, rec.error)
        assert rec.error and ("unexpected chunk shape" in rec.error or "not an object" in rec.error)
        assert "[DONE]" not in rec.error  # the stream was complete: no "ended before [DONE]"
    # odd values never reach the record as numbers or reasons
    last = recs[f"odd-{len(ODD) - 1}"]
    assert last.prompt_tokens is None and last.finish_reason is None


def test_malformed_chunk_is_blamed_on_the_stream_strict_or_lenient_client(tmp_path, caplog) -> None:
    # strict: the client walks away at the broken chunk; lenient: it reads on to [DONE]
    body = _next_to_healthy([("malformed", b"broken"), ("malformed", None)])
    records = with_hostile(tmp_path, caplog, body)
    (_, strict_broke), (lenient_got, lenient_broke) = body.results  # type: ignore[attr-defined]
    assert lenient_got == b"".join(MALFORMED) and not lenient_broke and not strict_broke
    bad = [r for r in records if r.labels["model"] == "malformed"]
    assert [r.labels["outcome"] for r in bad] == ["protocol_error", "protocol_error"]
    errors = sorted(r.error or "" for r in bad)
    assert errors[0] == "malformed JSON in stream"  # lenient: got [DONE], nothing else to say
    assert errors[1].startswith("malformed JSON in stream; then client went away")
    assert all("broken" not in e for e in errors)  # the payload (completion text) is never kept


def test_reset_mid_stream_is_an_upstream_abort(tmp_path, caplog) -> None:
    body = _next_to_healthy([("reset", None)])
    records = with_hostile(tmp_path, caplog, body)
    ((_, broke),) = body.results  # type: ignore[attr-defined]
    assert broke
    rec = by_model(records, ["reset"])["reset"]
    assert rec.labels["outcome"] == "upstream_abort_mid_stream" and rec.output_tokens_counted == 2


def test_endless_response_head_is_refused_as_a_bad_gateway(tmp_path, caplog) -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord]) -> None:
        async with s.post(gw.url + "/v1/chat/completions", json=chat("endless-head"), headers=AUTH) as r:
            assert r.status == 502
        got, broke = await stream(s, gw.url, "healthy")
        assert got == b"".join(HEALTHY) and not broke
        await wait_records(records, 2)

    records = with_hostile(tmp_path, caplog, body)
    rec = by_model(records, ["endless-head"])["endless-head"]
    assert rec.labels["outcome"] == "connect_error" and rec.error == "response head over 64 KiB"


def test_bench_client_cuts_an_endless_line_as_a_protocol_error() -> None:
    async def main() -> RequestRecord:
        async with HostileUpstream() as up:
            sender = Sender(parse_endpoint(up.url), get_dialect("chat"), "endless", Sampling(), True, 10.0)
            rec = RequestRecord("r")
            await sender.send(rec, sender.prepare("a", 4, "r"))
            await sender.close()
            return rec

    rec = asyncio.run(asyncio.wait_for(main(), 20))
    assert rec.status is Status.PROTOCOL_ERROR and rec.error == "event over 1 MiB without a blank line"
