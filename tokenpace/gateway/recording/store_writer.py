"""Real-traffic records into the run store: one run per gateway session and upstream (A/B arm).

Each run is labelled ``source=gateway``, ``gateway_session=<id>``, ``upstream=<name>``,
``arm=<arm>`` (plus the upstream's version/region and the gateway's ``--label``s), so ``tokenpace
compare source=gateway,arm=a source=gateway,arm=b`` puts the newest session's arm A against its arm
B. A run is created when its first record arrives; later batches are appended (records and
``record_count`` in one transaction).
Each run's ``summary`` (so ``tokenpace compare`` fills its whole-run rows) is kept as batches are
written (``core.running_summary``: exact counts, rates and goodput, percentiles from a sketch within
1 %, a memory that does not grow with the run) and stored after an append at most every
``summary_every_s`` (the first batch at once): never by reloading the run's records. At the
session's end (``finish``) the sketch summary is stored first, then, for a run of at most
``EXACT_SUMMARY_MAX_RECORDS`` records, replaced by the exact one with confidence intervals
(``tokenpace.core.metrics.summarize`` over its stored records); ``percentiles_from`` says which.

A live change of the config (lifecycle/reload.py) starts a new epoch: it is stored as a
configuration change (who, when, before, after), and the records made after it go to runs of their
own (``gw-SESSION-eN-UPSTREAM``, label ``config_epoch=N``, the epoch's split in their conditions),
so that ``tokenpace arms`` judges each split under its own weights. Per-epoch state is bounded:
the configs and running summaries of the newest ``KEEP_EPOCHS`` epochs are kept; an older epoch's
runs get their summary stored once more (the sketch's, final) and only their run id and next
sequence number are kept (for ``MAX_RETIRED_RUNS`` runs), so a record that finishes late, under an
epoch long changed, is still appended to its run; past that bound it is counted, not stored.

Called only from the record sink's writer thread, one batch at a time; a failure raises, and the
sink counts the batch as dropped. Traffic never waits on it. A record whose upstream is in no
config of its epoch (nor the start's) has no run to go to: it is counted (``unplaced``, and
``on_unplaced``: the gateway's ``tokenpace_gateway_records_unplaced_total``), never silently lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tokenpace import __version__
from tokenpace.adapters.store import Store, StoreError
from tokenpace.core.credentials import strip_credentials
from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.running_summary import RunningSummary
from tokenpace.gateway.config.config import GatewayConfig, Upstream
from tokenpace.gateway.config.live import LiveChange

RUN_KIND = "gateway"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# At the session's end, a run of at most this many records gets the exact summary (loaded and
# summarised in about 2 s on a busy 2-core VM, inside the writer's share of --shutdown-timeout);
# a longer one keeps the sketch's (benchmarks/store_summary.py: 100 000 records took 16 s, 1 GB).
EXACT_SUMMARY_MAX_RECORDS = 10_000
# Epochs whose config and running summaries are kept (a live change a second for an hour kept
# 3,600 of each); a retired epoch's run keeps its id and next sequence number only, for this many.
KEEP_EPOCHS = 16
MAX_RETIRED_RUNS = 4096


def _safe_url(url: str) -> str:
    """The URL without user:password (never stored), nor its query."""
    parts = urlsplit(strip_credentials(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class _Arm:
    __slots__ = ("epoch", "run_id", "running", "seq", "summarized", "upstream")

    def __init__(self, run_id: str, upstream: Upstream, running: RunningSummary, epoch: str = "0") -> None:
        self.run_id = run_id
        self.epoch = epoch
        self.upstream = upstream
        self.running = running  # the summary of the records stored so far, kept as they are
        self.seq = -1  # -1: the run is not in the store yet
        self.summarized = float("-inf")  # monotonic time of the last summary


class StoreRecordWriter:
    """A ``BatchWriter`` (``list[RequestRecord] -> None``) that appends to per-upstream runs."""

    def __init__(
        self,
        store: Store,
        config: GatewayConfig,
        session: str,
        labels: Mapping[str, str] | None = None,
        summary_every_s: float = 60.0,
    ) -> None:
        self.store = store
        self.summary_every_s = summary_every_s
        self.summary_errors = 0
        self.config = config
        self.session = session
        self.labels = dict(labels or {})
        self.started = datetime.now(timezone.utc)
        self.anchor = {"perf_ns": time.perf_counter_ns(), "unix_ns": time.time_ns()}
        self.arms: dict[tuple[str, str], _Arm] = {}  # (epoch, upstream) -> its run, made at its first record
        self.configs = {"0": config}  # the newest KEEP_EPOCHS epochs' configs (live changes)
        self.changes_stored = 0
        # (epoch, upstream) -> (run id, next seq) of a retired epoch's stored runs, oldest first
        self.retired: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()
        self.late_unstored = 0  # records of an epoch retired past MAX_RETIRED_RUNS: counted only
        self.unplaced = 0  # records with no run to go to (their upstream in no config of their epoch)
        self.on_unplaced: Callable[[int], None] | None = None

    def _arm(self, epoch: str, name: str) -> _Arm | None:
        arm = self.arms.get((epoch, name))
        if arm is not None:
            return arm
        config = self.configs.get(epoch)
        if config is None:
            return None
        ups = {u.name: u for u in (*config.upstreams, *(m.upstream for m in config.mirrors))}
        if name not in ups:
            return None
        safe = _ID_SAFE.sub("_", name)[:40]
        run_id = f"gw-{self.session[:16]}-{'' if epoch == '0' else f'e{epoch}-'}{safe}"
        arm = self.arms[(epoch, name)] = _Arm(run_id, ups[name], RunningSummary(config.slo), epoch)
        return arm

    def run_labels(self, up: Upstream, epoch: str = "0") -> dict[str, str]:
        config = self.configs[epoch]
        return {
            **self.labels,
            **config.static_labels,
            **up.labels,
            "source": "gateway",
            "gateway_session": self.session,
            "config_epoch": epoch,
            "upstream": up.name,
            "arm": up.arm,
            **({"shadow": "true"} if up.name in {m.name for m in config.mirrors} else {}),
        }

    def conditions(self, up: Upstream, epoch: str = "0") -> dict[str, Any]:
        config = self.configs[epoch]
        return {
            "source": "gateway",
            "model": up.model,
            "endpoint": _safe_url(up.url),
            "labels": self.run_labels(up, epoch),
            "slo": config.slo.to_dict(),
            "gateway": {
                "session": self.session,
                "epoch": int(epoch),
                "upstreams": len(config.upstreams),
                # the configured split, for the sample-ratio check of ``tokenpace arms``
                "split": split(config),
            },
            "started_at": self.started.isoformat(),
            "clock": {"source": "time.perf_counter_ns", **self.anchor},
            "tool": {"name": "tokenpace gateway", "version": __version__},
        }

    def __call__(self, batch: list[RequestRecord | OutcomeEvent | LiveChange]) -> None:
        groups: dict[tuple[str, str], list[RequestRecord]] = {}
        events: list[OutcomeEvent] = []
        failed: StoreError | None = None
        for rec in batch:
            if isinstance(rec, OutcomeEvent):
                events.append(OutcomeEvent(**{**rec.to_dict(), "session": self.session}))
            elif isinstance(rec, LiveChange):
                failed = self._change(rec) or failed
            else:
                key = (rec.labels.get("config_epoch", "0"), rec.labels.get("upstream", ""))
                groups.setdefault(key, []).append(rec)
        try:
            self.store.save_events(events)
        except StoreError as exc:
            failed = exc
        for (epoch, name), records in groups.items():
            arm = self._arm(epoch, name) or self._arm("0", name)
            if arm is None:
                failed = self._append_retired(epoch, name, records) or failed
                continue
            try:
                self._append(arm, records)
            except StoreError as exc:
                failed = exc
                continue
            try:
                arm.running.add(records)  # only what was stored
            except Exception:  # bookkeeping must never fail a stored batch
                self.summary_errors += 1
            if time.monotonic() - arm.summarized >= self.summary_every_s:
                self._store_running(arm)
        if failed is not None:
            raise failed

    def _count_unplaced(self, n: int) -> None:
        self.unplaced += n
        if self.on_unplaced is not None:
            with contextlib.suppress(Exception):  # bookkeeping must never stop the writer
                self.on_unplaced(n)

    def _change(self, change: LiveChange) -> StoreError | None:
        """The new epoch's config kept (its records may follow at once), the change stored."""
        event: ConfigChange = change.event
        self.configs[str(event.epoch)] = change.config
        self._retire(event.epoch - KEEP_EPOCHS)
        if change.stored:
            return None
        try:
            self.store.save_config_change(dataclasses.replace(event, session=self.session))
        except StoreError as exc:
            return exc
        self.changes_stored += 1
        return None

    def _retire(self, last: int) -> None:
        """Epochs up to ``last`` can no longer be judged live: their summaries are stored (final),
        then their config and summaries freed; their runs keep an id and a sequence number."""
        old = [e for e in self.configs if int(e) <= last]
        if not old:
            return
        for epoch in old:
            del self.configs[epoch]
        gone = set(old)
        for key in [k for k in self.arms if k[0] in gone]:
            arm = self.arms.pop(key)
            if arm.seq > 0:
                self._store_running(arm)
            if arm.seq >= 0:
                self.retired[key] = (arm.run_id, arm.seq)
        while len(self.retired) > MAX_RETIRED_RUNS:
            self.retired.popitem(last=False)

    def _append_retired(self, epoch: str, name: str, records: list[RequestRecord]) -> StoreError | None:
        """Records of a retired epoch: appended to its run if it is still known, else counted."""
        known = self.retired.get((epoch, name))
        if known is None:  # retired past the bound, or in no config of its epoch: counted
            self.late_unstored += len(records)
            self._count_unplaced(len(records))
            return None
        run_id, seq = known
        try:
            self.store.append_records(run_id, records, first_seq=seq)
        except StoreError as exc:
            return exc
        self.retired[(epoch, name)] = (run_id, seq + len(records))
        return None

    def finish(self) -> None:
        """At the session's end, after the last batch: every stored run's final summary. The
        sketch's first (at once, for every run), then the exact one where the run is short enough:
        a shutdown cut short still leaves each run a summary of all its records."""
        stored = [arm for arm in self.arms.values() if arm.seq > 0]
        for arm in stored:
            self._store_running(arm)
        for arm in stored:
            if arm.seq <= EXACT_SUMMARY_MAX_RECORDS:
                self._store_exact(arm)

    def _store_running(self, arm: _Arm) -> None:
        """Never fails the batch: its records are stored already; a failed summary is counted."""
        arm.summarized = time.monotonic()
        try:
            self.store.set_summary(arm.run_id, arm.running.to_dict())
        except Exception:  # bookkeeping must never stop the writer
            self.summary_errors += 1

    def _store_exact(self, arm: _Arm) -> None:
        try:
            records = self.store.load_records(arm.run_id)
            summary = summarize(records, arm.running.slo, with_ci=True).to_dict()
            summary["percentiles_from"] = "records"
            self.store.set_summary(arm.run_id, summary)
        except Exception:  # the sketch's summary stays
            self.summary_errors += 1

    def _append(self, arm: _Arm, records: list[RequestRecord]) -> None:
        if arm.seq < 0:
            up = arm.upstream
            conditions, labels = self.conditions(up, arm.epoch), self.run_labels(up, arm.epoch)
            conditions["model"] = up.model or asked_model(records)  # the run's model in `runs list`
            self.store.save_run(arm.run_id, conditions, {}, [], kind=RUN_KIND, labels=labels)
            arm.seq = 0
        self.store.append_records(arm.run_id, records, first_seq=arm.seq)
        arm.seq += len(records)


def asked_model(records: list[RequestRecord]) -> str | None:
    """The model a run's first records asked for, when they name one (an upstream with no model=
    serves whatever it is asked); None when they name several or none the gateway could label."""
    names = {r.labels.get("model") for r in records} - {None, "", "unknown", "other"}
    return names.pop() if len(names) == 1 else None


def split(config: GatewayConfig) -> list[dict[str, Any]]:
    """Per upstream: its arm, configured weight, ramp and model (what the router was told)."""
    return [
        {"upstream": u.name, "arm": u.arm, "weight": u.weight, "ramp_s": u.ramp_s, "model": u.model}
        for u in config.upstreams
    ]
