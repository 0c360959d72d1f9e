"""Per-epoch state in the store writer is bounded (issue 49, item 3): each live change kept a config
and a running summary per upstream for good (75 -> 271 MB over 1,427 changes). Now the newest
KEEP_EPOCHS are kept; an older epoch's runs keep their summary in the store and, in memory, only
their id and next sequence number, so a record finishing late still lands in its run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tokenpace.adapters.store import connect
from tokenpace.core.events import ConfigChange
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.config.live import LiveChange
from tokenpace.gateway.recording import store_writer
from tokenpace.gateway.recording.store_writer import KEEP_EPOCHS, StoreRecordWriter


def rec(i: int, epoch: int, upstream: str) -> RequestRecord:
    base = (i + 1) * 1_000_000_000
    return RequestRecord(
        request_id=f"r{epoch}-{upstream}-{i}",
        labels={"upstream": upstream, "arm": upstream, "outcome": "ok", "config_epoch": str(epoch)},
        scheduled_ns=base,
        dispatched_ns=base,
        sent_ns=base,
        headers_ns=base + 5_000_000,
        first_token_ns=base + 10_000_000,
        token_ns=[base + 10_000_000, base + 20_000_000],
        end_ns=base + 30_000_000,
        output_tokens_counted=2,
    )


def change(config: GatewayConfig, epoch: int) -> LiveChange:
    ups = tuple(dataclasses.replace(u, weight=1.0 + epoch) for u in config.upstreams)
    new = dataclasses.replace(config, upstreams=ups)
    return LiveChange(ConfigChange("", epoch, 0.0, "test", ("upstream",), {}, {}), new)


def test_many_live_changes_keep_a_bounded_number_of_epochs_and_late_records_are_stored(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(store_writer, "MAX_RETIRED_RUNS", 40)
    store = connect(str(tmp_path / "runs.db"))
    config = GatewayConfig(
        upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"), parse_upstream("b=http://127.0.0.1:2/v1")),
        port=0,
    )
    writer = StoreRecordWriter(store, config, "s9", summary_every_s=3600.0)
    for epoch in range(0, 60):
        batch: list = [change(config, epoch)] if epoch else []
        writer([*batch, rec(0, epoch, "a"), rec(1, epoch, "b")])
        assert len(writer.configs) <= KEEP_EPOCHS  # never more than the newest epochs
        assert len(writer.arms) <= 2 * KEEP_EPOCHS
        assert len(writer.retired) <= 40
    assert sorted(int(e) for e in writer.configs) == list(range(60 - KEEP_EPOCHS, 60))
    # a record of a retired epoch finishing late: appended to its own run, after the first
    late_epoch = 59 - KEEP_EPOCHS - 3
    writer([rec(7, late_epoch, "a")])
    run_id = f"gw-s9-e{late_epoch}-a"
    assert [r.request_id for r in store.load_records(run_id)] == [f"r{late_epoch}-a-0", f"r{late_epoch}-a-7"]
    info = store.get_run(run_id)
    assert info is not None and info.summary["counts"]["sent"] == 1  # its summary stored at retirement
    # one retired past the bound: counted, never a crash nor a run of the wrong epoch
    writer([rec(8, 2, "b")])
    assert writer.late_unstored == 1
    assert len(store.load_records("gw-s9-e2-b")) == 1
    store.close()
