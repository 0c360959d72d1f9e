"""The gateway's stored run summary is kept as batches are written: the periodic one never reloads
the run's records; the final one is exact for a short run and the sketch's for a long one, and
says which; ``runs show`` reads either."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from tokenpace.adapters.store import connect
from tokenpace.app.baseline.history import refuse_finer_than_sketch
from tokenpace.cli.library.runs_cmd import runs
from tokenpace.core.events import OutcomeEvent
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.recording import store_writer
from tokenpace.gateway.recording.store_writer import StoreRecordWriter

MS = 1_000_000
CONFIG = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0)


def _rec(i: int) -> RequestRecord:
    sent = (i + 1) * 10 * MS
    ttft = (5 + i % 40) * MS
    return RequestRecord(
        request_id=f"r{i}",
        labels={"upstream": "a", "arm": "a", "outcome": "ok"},
        scheduled_ns=sent,
        dispatched_ns=sent,
        sent_ns=sent,
        first_token_ns=sent + ttft,
        token_ns=[sent + ttft, sent + ttft + 2 * MS, sent + ttft + 5 * MS],
        end_ns=sent + ttft + 6 * MS,
        output_tokens_counted=3,
    )


class FakeStore:
    """Keeps what the writer stores; counts every time the run's records are read back."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.summaries: list[dict[str, Any]] = []
        self.loads = 0

    def save_run(self, *_args: object, **_kw: object) -> None:
        pass

    def append_records(self, _run_id: str, records: Sequence[RequestRecord], first_seq: int) -> None:
        assert first_seq == len(self.records)
        self.records.extend(records)

    def set_summary(self, _run_id: str, summary: Mapping[str, Any]) -> None:
        self.summaries.append(dict(summary))

    def save_events(self, _events: Sequence[OutcomeEvent]) -> None:
        pass

    def load_records(self, _run_id: str) -> list[RequestRecord]:
        self.loads += 1
        return list(self.records)


def test_periodic_summary_never_reloads_records_and_final_is_exact() -> None:
    store = FakeStore()
    writer = StoreRecordWriter(store, CONFIG, "s1", summary_every_s=0.0)  # type: ignore[arg-type]
    for b in range(20):
        writer([_rec(b * 50 + i) for i in range(50)])
    assert store.loads == 0  # 20 periodic summaries, not one read of the records
    assert len(store.summaries) == 20
    last = store.summaries[-1]
    assert last["counts"]["sent"] == last["counts"]["ok"] == 1000
    assert last["percentiles_from"] == "sketch" and last["sketch"]["relative_error"] == 0.01
    assert abs(last["ttft_ms"]["p50"] - 24.5) <= 0.01 * 24.5 and last["ttft_ms"]["ci95"] == {}
    writer.finish()
    assert store.loads == 1  # the session's end: a short run gets its exact summary, with intervals
    final = store.summaries[-1]
    assert final["percentiles_from"] == "records" and final["ttft_ms"]["ci95"]["p50"]
    assert final["counts"] == last["counts"] and writer.summary_errors == 0


def test_long_run_keeps_the_sketch_summary_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_writer, "EXACT_SUMMARY_MAX_RECORDS", 99)
    store = FakeStore()
    writer = StoreRecordWriter(store, CONFIG, "s2", summary_every_s=3600.0)  # type: ignore[arg-type]
    writer([_rec(i) for i in range(60)])
    writer([_rec(60 + i) for i in range(60)])
    assert len(store.summaries) == 1  # the first batch at once, then not within the hour
    writer.finish()
    assert store.loads == 0
    final = store.summaries[-1]
    assert final["percentiles_from"] == "sketch" and final["counts"]["sent"] == 120


def test_sketch_summary_is_readable_by_runs_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_writer, "EXACT_SUMMARY_MAX_RECORDS", 0)
    db = tmp_path / "runs.db"
    store = connect(str(db))
    writer = StoreRecordWriter(store, CONFIG, "s3", summary_every_s=0.0)
    writer([_rec(i) for i in range(200)])
    writer.finish()
    (run,) = store.list_runs(where={"gateway_session": "s3"})
    store.close()
    shown = CliRunner().invoke(runs, ["show", run.id, "--store", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "ttft_ms" in shown.output and "200" in shown.output
    as_json = CliRunner().invoke(runs, ["show", run.id, "--json", "--store", str(db)])
    summary = orjson.loads(as_json.output)["summary"]
    assert summary["percentiles_from"] == "sketch" and summary["counts"]["sent"] == 200


def test_history_refuses_a_shift_finer_than_a_sketch_can_tell() -> None:
    store = FakeStore()
    writer = StoreRecordWriter(store, CONFIG, "s4", summary_every_s=0.0)  # type: ignore[arg-type]
    writer([_rec(i) for i in range(50)])
    sketchy, exact = store.summaries[-1], {"percentiles_from": "records"}
    with pytest.raises(ValueError, match="--min-shift 2%"):
        refuse_finer_than_sketch("ttft.p95", 0.01, [exact, sketchy])
    refuse_finer_than_sketch("ttft.p95", 0.05, [exact, sketchy])  # the default 5 %: judged
    refuse_finer_than_sketch("ttft.p95", 0.01, [exact, exact])  # exact percentiles: any shift
    refuse_finer_than_sketch("throughput", 0.01, [sketchy])  # whole-run numbers are exact anyway
