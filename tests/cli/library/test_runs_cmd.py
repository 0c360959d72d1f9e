"""`runs list` on a live gateway session: counts that say how far the summary goes, and the model."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tokenpace.adapters.store import connect
from tokenpace.cli.main import cli
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.recording.store_writer import StoreRecordWriter


def _rec(i: int, model: str = "llama-8b") -> RequestRecord:
    base = (i + 1) * 1_000_000_000
    return RequestRecord(
        request_id=f"r{i}",
        labels={"upstream": "a", "arm": "a", "model": model},
        scheduled_ns=base,
        dispatched_ns=base,
        sent_ns=base,
        first_token_ns=base + 10_000_000,
        token_ns=[base + 10_000_000],
        end_ns=base + 20_000_000,
        output_tokens_counted=1,
    )


def _list(db: str) -> str:
    done = CliRunner().invoke(cli, ["runs", "list", "--store", db], env={"COLUMNS": "250"})
    assert done.exit_code == 0, done.output
    return done.output


def test_a_live_gateway_run_shows_ok_of_the_summarised_requests_and_the_asked_model(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store = connect(db)
    config = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0)
    writer = StoreRecordWriter(store, config, "live", summary_every_s=3600.0)
    writer([_rec(0), _rec(1)])  # the first batch is summarised at once
    writer([_rec(i) for i in range(2, 7)])  # the next ones wait for the minute
    row = next(line for line in _list(db).splitlines() if "gw-live" in line)
    assert "llama-8b" in row and " 7 " in row
    assert "2 of 2" in row and "summary of 2 of 7 records" in row
    writer.finish()  # the session's end: the summary covers every record
    row = next(line for line in _list(db).splitlines() if "gw-live" in line)
    assert " 7 " in row and "of" not in row.split("llama-8b")[1]
    store.close()


def test_a_gateway_run_names_the_upstreams_model_or_none_when_asked_for_several(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    upstreams = (
        parse_upstream("a=http://127.0.0.1:1/v1,model=served-m"),
        parse_upstream("b=http://127.0.0.1:2/v1"),
    )
    writer = StoreRecordWriter(store, GatewayConfig(upstreams=upstreams, port=0), "s")
    b = [
        RequestRecord(request_id=f"b{i}", labels={"upstream": "b", "arm": "b", "model": m})
        for i, m in enumerate("xy")
    ]
    writer([_rec(0, "asked"), *b])
    models = {r.labels["upstream"]: r.model for r in store.list_runs(where={"gateway_session": "s"})}
    assert models == {"a": "served-m", "b": None}
    store.close()
