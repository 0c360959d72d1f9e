"""A gateway's static labels (``--label region=eu-west-1``) on every /metrics series, every record
(JSONL, the store's runs, shadow copies) and the resource of every span; bad ones refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from subprocess import CompletedProcess

import aiohttp
import orjson
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from gateway.request_path.test_gateway import CHAT, FixedUpstream
from tokenpace.adapters.store import connect
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.config.static_labels import MAX_LABELS, MAX_VALUE_CHARS, RESERVED, parse_labels
from tokenpace.gateway.experiments.events import EVENTS
from tokenpace.gateway.experiments.mirror import parse_mirror
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.prom import REQUESTS, TTFT
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.procs import run_cli

STATIC = {"region": "eu-west-1", "zone": "b"}
OPENMETRICS = {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}


async def _scrape(s: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None) -> str:
    async with s.get(url + "/metrics", headers=headers or {}) as r:
        assert r.status == 200
        return await r.text()


def _traffic(tmp_path: Path, otlp_url: str) -> tuple[list[RequestRecord], str, str]:
    store = connect(str(tmp_path / "runs.db"))

    async def main() -> tuple[list[RequestRecord], str, str]:
        records: list[RequestRecord] = []
        async with FixedUpstream() as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"live={up.url}"),),
                mirrors=(parse_mirror(f"cand={up.url}"),),
                port=0,
                records_path=str(tmp_path / "records.jsonl"),
                otlp_endpoint=otlp_url,
                static_labels=dict(STATIC),
            )
            writer = StoreRecordWriter(store, config, "sess1")
            gw = RunningGateway(config, writer=writer, on_record=records.append)
            async with gw, aiohttp.ClientSession() as s:
                for stream in (True, False):
                    async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": stream}) as r:
                        assert r.status == 200
                        rid = r.headers["x-request-id"]
                        await r.read()
                event = {"event": "accepted", "request_id": rid}
                async with s.post(gw.admin_url + "/tokenpace/events", data=orjson.dumps(event)) as r:
                    assert r.status < 300, await r.text()
                for _ in range(100):  # the shadow copies finish on their own
                    if len(records) >= 4:
                        break
                    await asyncio.sleep(0.05)
                text = await _scrape(s, gw.url)
                openmetrics = await _scrape(s, gw.url, OPENMETRICS)
        writer.finish()
        return records, text, openmetrics

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_static_labels_on_every_series_record_stored_run_and_span(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from tokenpace.testing.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as rx:
        records, text, openmetrics = _traffic(tmp_path, rx.url)
        spans = rx.wait_for(20, until=lambda got: len(got) >= 2 * 7)
    # /metrics: every sample of every family carries them; the gateway's own names are all reserved
    families = list(text_string_to_metric_families(text))
    names = {f.name for f in families}
    assert names >= {TTFT, REQUESTS.removesuffix("_total"), EVENTS.removesuffix("_total")}
    own: set[str] = set()
    for family in families:
        for sample in family.samples:
            assert {k: sample.labels.get(k) for k in STATIC} == STATIC, (family.name, sample)
            own |= sample.labels.keys() - STATIC.keys()
    assert own and own <= RESERVED, own - RESERVED
    # OpenMetrics: the labels, and the exemplars (trace ids) still there
    exemplars = [
        s
        for f in openmetrics_families(openmetrics)
        if f.name == TTFT
        for s in f.samples
        if s.exemplar is not None
    ]
    assert exemplars and all(s.labels["region"] == "eu-west-1" for s in exemplars)
    assert {s.exemplar.labels["trace_id"] for s in exemplars} <= {r.trace_id for r in records}  # type: ignore[union-attr]
    # records: live and shadow, as they were made, in the JSONL file and in the store's runs
    assert len(records) == 4 and {r.labels.get("shadow") for r in records} == {None, "true"}
    assert all({k: r.labels.get(k) for k in STATIC} == STATIC for r in records)
    lines = [orjson.loads(line) for line in (tmp_path / "records.jsonl").read_bytes().splitlines()]
    assert len(lines) == 4 and all({k: d["labels"].get(k) for k in STATIC} == STATIC for d in lines)
    store = connect(str(tmp_path / "runs.db"))
    runs = store.list_runs(where={"region": "eu-west-1", "zone": "b"})
    assert sorted(r.labels["upstream"] for r in runs) == ["cand", "live"]
    assert all(
        {k: r.labels.get(k) for k in STATIC} == STATIC for run in runs for r in store.load_records(run.id)
    )
    (event,) = store.load_events(0.0)  # an outcome event: in its session, whose runs carry the labels
    assert store.list_runs(where={"gateway_session": event.session or "", "region": "eu-west-1"})
    # spans: the labels on each span's resource
    assert spans and all({k: s["resource"].get(k) for k in STATIC} == STATIC for s in spans)


@pytest.mark.parametrize(
    ("items", "says"),
    [
        (["region"], "expected KEY=VALUE"),
        (["bad-key=x"], "Prometheus label name"),
        (["__name=x"], "Prometheus label name"),
        (["arm=x"], "the gateway's own label"),
        (["le=x"], "the gateway's own label"),
        (["region=a", "region=b"], "given twice"),
        ([f"k{i}=v" for i in range(MAX_LABELS + 1)], f"at most {MAX_LABELS}"),
        (["region=" + "x" * (MAX_VALUE_CHARS + 1)], f"1 to {MAX_VALUE_CHARS} printable"),
        (["region="], f"1 to {MAX_VALUE_CHARS} printable"),
        (["region=eu\nwest"], "no newline"),
        (["region=eu\udcffwest"], "not UTF-8"),  # a byte that was not UTF-8, as Python decodes argv
    ],
)
def test_bad_labels_are_refused_with_one_line(items: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=says) as err:
        parse_labels(items)
    assert "\n" not in str(err.value) and "eu\nwest" not in str(err.value)


def test_bounds_at_the_limits_are_accepted() -> None:
    items = [f"k{i}=" + "é" * MAX_VALUE_CHARS for i in range(MAX_LABELS)]
    assert len(parse_labels(items)) == MAX_LABELS


def _gateway_cli(*args: str) -> CompletedProcess[str]:
    return run_cli("gateway", "--upstream", "a=http://127.0.0.1:1/v1,region=us-east-1", *args)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--label", "bad-key=x"), "Prometheus label name"),
        (("--label", "outcome=x"), "the gateway's own label"),
        (("--label", "region=eu-west-1"), "also upstream a's region="),
    ],
)
def test_the_command_refuses_bad_labels_exit_2(args: tuple[str, ...], says: str) -> None:
    done = _gateway_cli(*args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_emitted_dashboard_splits_p95_by_each_label_key(tmp_path: Path) -> None:
    done = _gateway_cli("--label", "zone=b", "--emit-rules", str(tmp_path))
    assert done.returncode == 0, done.stderr
    board = orjson.loads((tmp_path / "tokenpace-gateway-dashboard.json").read_bytes())
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == ["datasource", "model", "upstream", "arm", "region", "gateway_fleet", "zone"]
    ttft = next(p for p in board["panels"] if p["title"] == "TTFT (gateway)")
    p95 = ttft["targets"][1]["expr"]
    assert 'zone=~"$zone"' in p95 and "sum by (model, upstream, arm, api, zone, le)" in p95, p95
