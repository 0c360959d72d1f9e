"""Real traffic through the gateway lands in the run store as one run per arm; compare sees B slower."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson
from click.testing import CliRunner

from tokenpace.adapters.store import StoreError, connect
from tokenpace.app.baseline.compare import compare_runs
from tokenpace.cli.library.compare_cmd import compare
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter, _safe_url
from tokenpace.testing.scripted_server import Script, ScriptedServer

# enough requests an arm that one run measures its own noise (a short run whose requests drift
# together is rightly undecided)
USERS = 240
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}


async def _traffic(url: str, users: int, at_once: int = 6) -> None:
    # a few at a time: sent all at once they queue together on a busy host, one shared stall that
    # the comparison rightly counts as about one independent sample (undecided)
    limit = asyncio.Semaphore(at_once)
    async with aiohttp.ClientSession() as s:

        async def one(i: int) -> None:
            headers = {"x-user-id": f"user-{i}", "Authorization": "Bearer sk-client-secret"}
            async with limit, s.post(url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
                assert r.status == 200
                await r.read()

        await asyncio.gather(*(one(i) for i in range(users)))


def test_ab_traffic_is_stored_per_arm_and_compare_shows_b_slower(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = connect(str(db))
    slow_port: list[int] = []

    async def main() -> StoreRecordWriter:
        async with (
            ScriptedServer(Script(ttft_s=0.005, itl_s=0.002)) as fast,
            ScriptedServer(Script(ttft_s=0.080, itl_s=0.002)) as slow,
        ):
            config = GatewayConfig(
                upstreams=(
                    parse_upstream(f"a={fast.url},version=v1"),
                    parse_upstream(f"b={slow.url},version=v2"),
                ),
                port=0,
            )
            slow_port.append(slow.port)
            writer = StoreRecordWriter(store, config, "sess1", {"team": "x"})
            gw = RunningGateway(config, writer=writer)
            async with gw:
                await _traffic(gw.url, USERS)
            assert gw.gateway.sink.dropped == 0
            assert gw.gateway.sink.written == USERS
            return writer

    writer_box = [asyncio.run(main())]
    runs = store.list_runs(where={"source": "gateway"})
    assert len(runs) == 2
    by_arm = {r.labels["arm"]: r for r in runs}
    assert by_arm.keys() == {"a", "b"}
    assert by_arm["b"].kind == "gateway"
    assert by_arm["b"].labels["version"] == "v2" and by_arm["b"].labels["team"] == "x"
    assert by_arm["b"].labels["gateway_session"] == "sess1"
    assert sum(r.record_count for r in runs) == USERS
    for run in runs:
        assert run.record_count > 5  # sticky hashing put users on both arms
        records = store.load_records(run.id)
        assert len(records) == run.record_count
        assert {r.labels["upstream"] for r in records} == {run.labels["upstream"]}
    full_b = store.get_run(by_arm["b"].id)
    assert full_b is not None and full_b.endpoint == f"http://127.0.0.1:{slow_port[0]}/v1"
    raw = db.read_bytes()
    assert b"sk-client-secret" not in raw

    for run in runs:  # the session's end recomputed each run's summary over all its records
        full = store.get_run(run.id)
        assert full is not None and full.summary["counts"]["sent"] == run.record_count
        assert full.summary["counts"]["ok"] == run.record_count and full.summary["request_throughput"] > 0
    assert writer_box[0].summary_errors == 0

    rc = compare_runs(store, "source=gateway,arm=a", "source=gateway,arm=b", resamples=200)
    ttft = next(m for m in rc.comparison.metrics if m.metric == "ttft")
    assert ttft.verdict.value == "slower"
    rows = {row["name"]: row for row in rc.run_level}  # whole-run rows are filled
    assert rows["request_throughput"]["a"] > 0 and rows["request_throughput"]["b"] > 0
    assert rows["error_rate"]["a"] == 0 and rows["error_rate"]["b"] == 0

    # and through the CLI, as a user would run it
    result = CliRunner().invoke(
        compare, ["source=gateway,arm=a", "source=gateway,arm=b", "--json", "--store", str(db)]
    )
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert data["a"]["labels"]["arm"] == "a" and data["b"]["labels"]["arm"] == "b"
    assert next(m for m in data["metrics"] if m["metric"] == "ttft")["verdict"] == "slower"
    store.close()


def test_failing_store_never_blocks_traffic_and_counts_drops(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))

    def broken(*_a: object, **_k: object) -> None:
        raise StoreError("disk full")

    store.save_run = broken  # type: ignore[method-assign]
    seen: list[RequestRecord] = []

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"a={up.url}"),), port=0)
            gw = RunningGateway(config, writer=StoreRecordWriter(store, config, "s2"), on_record=seen.append)
            async with gw:
                await _traffic(gw.url, 5)
                async with aiohttp.ClientSession() as s, s.get(gw.url + "/metrics") as r:
                    text = await r.text()
            assert len(seen) == 5
            assert gw.gateway.sink.written == 0
            assert gw.gateway.sink.dropped == 5
            assert gw.gateway.sink.write_errors >= 1
            assert "tokenpace_gateway_records_dropped_total" in text

    asyncio.run(main())
    assert store.list_runs() == []
    store.close()


def test_summary_follows_appended_batches(tmp_path: Path) -> None:
    """Without waiting for the session's end: the summary covers every batch appended so far."""
    store = connect(str(tmp_path / "runs.db"))
    config = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0)
    writer = StoreRecordWriter(store, config, "s3", summary_every_s=0.0)

    def rec(i: int) -> RequestRecord:
        base = (i + 1) * 1_000_000_000  # a send time of 0 would mean "never sent"
        return RequestRecord(
            request_id=f"r{i}",
            labels={"upstream": "a", "arm": "a", "outcome": "ok"},
            scheduled_ns=base,
            dispatched_ns=base,
            sent_ns=base,
            headers_ns=base + 5_000_000,
            first_token_ns=base + 10_000_000,
            token_ns=[base + 10_000_000, base + 20_000_000],
            end_ns=base + 30_000_000,
            output_tokens_counted=2,
        )

    writer([rec(0), rec(1)])
    writer([rec(2)])
    (run,) = store.list_runs(where={"gateway_session": "s3"})
    full = store.get_run(run.id)
    assert full is not None and full.summary["counts"]["sent"] == 3
    assert abs(full.summary["ttft_ms"]["p50"] - 10.0) < 1e-6
    store.close()


def test_stored_endpoint_drops_credentials() -> None:
    assert _safe_url("http://user:pw@10.0.0.2:8000/v1?k=1") == "http://10.0.0.2:8000/v1"


def test_a_record_with_no_run_is_counted_never_silently_lost(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    config = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0)
    writer = StoreRecordWriter(store, config, "s4")
    counted: list[int] = []
    writer.on_unplaced = counted.append
    stray = RequestRecord(request_id="x", labels={"upstream": "nowhere", "config_epoch": "3"})
    writer([stray, stray])
    assert writer.unplaced == 2 and counted == [2] and store.list_runs() == []
    store.close()
