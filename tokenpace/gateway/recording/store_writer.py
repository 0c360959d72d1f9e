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

Called only from the record sink's writer thread, one batch at a time; a failure raises, and the
sink counts the batch as dropped. Traffic never waits on it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tokenpace import __version__
from tokenpace.adapters.store import Store, StoreError
from tokenpace.core.credentials import strip_credentials
from tokenpace.core.events import OutcomeEvent
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.running_summary import RunningSummary
from tokenpace.gateway.config.config import GatewayConfig, Upstream

RUN_KIND = "gateway"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# At the session's end, a run of at most this many records gets the exact summary (loaded and
# summarised in about 2 s on a busy 2-core VM, inside the writer's share of --shutdown-timeout);
# a longer one keeps the sketch's (benchmarks/store_summary.py: 100 000 records took 16 s, 1 GB).
EXACT_SUMMARY_MAX_RECORDS = 10_000


def _safe_url(url: str) -> str:
    """The URL without user:password (never stored), nor its query."""
    parts = urlsplit(strip_credentials(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class _Arm:
    __slots__ = ("run_id", "running", "seq", "summarized", "upstream")

    def __init__(self, run_id: str, upstream: Upstream, running: RunningSummary) -> None:
        self.run_id = run_id
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
        self.arms: dict[str, _Arm] = {}
        self.shadows = {m.name for m in config.mirrors}  # mirrored candidates: shadow arms
        for u in (*config.upstreams, *(m.upstream for m in config.mirrors)):
            name = _ID_SAFE.sub("_", u.name)[:40]
            self.arms[u.name] = _Arm(f"gw-{session[:16]}-{name}", u, RunningSummary(config.slo))

    def run_labels(self, up: Upstream) -> dict[str, str]:
        return {
            **self.labels,
            **self.config.static_labels,
            **up.labels,
            "source": "gateway",
            "gateway_session": self.session,
            "upstream": up.name,
            "arm": up.arm,
            **({"shadow": "true"} if up.name in self.shadows else {}),
        }

    def conditions(self, up: Upstream) -> dict[str, Any]:
        return {
            "source": "gateway",
            "model": up.model,
            "endpoint": _safe_url(up.url),
            "labels": self.run_labels(up),
            "slo": self.config.slo.to_dict(),
            "gateway": {
                "session": self.session,
                "upstreams": len(self.config.upstreams),
                # the configured split, for the sample-ratio check of ``tokenpace arms``
                "split": split(self.config),
            },
            "started_at": self.started.isoformat(),
            "clock": {"source": "time.perf_counter_ns", **self.anchor},
            "tool": {"name": "tokenpace gateway", "version": __version__},
        }

    def __call__(self, batch: list[RequestRecord | OutcomeEvent]) -> None:
        groups: dict[str, list[RequestRecord]] = {}
        events: list[OutcomeEvent] = []
        for rec in batch:
            if isinstance(rec, OutcomeEvent):
                events.append(OutcomeEvent(**{**rec.to_dict(), "session": self.session}))
                continue
            groups.setdefault(rec.labels.get("upstream", ""), []).append(rec)
        failed: StoreError | None = None
        try:
            self.store.save_events(events)
        except StoreError as exc:
            failed = exc
        for name, records in groups.items():
            arm = self.arms.get(name)
            if arm is None:
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
            summary = summarize(records, self.config.slo, with_ci=True).to_dict()
            summary["percentiles_from"] = "records"
            self.store.set_summary(arm.run_id, summary)
        except Exception:  # the sketch's summary stays
            self.summary_errors += 1

    def _append(self, arm: _Arm, records: list[RequestRecord]) -> None:
        if arm.seq < 0:
            up = arm.upstream
            self.store.save_run(
                arm.run_id, self.conditions(up), {}, [], kind=RUN_KIND, labels=self.run_labels(up)
            )
            arm.seq = 0
        self.store.append_records(arm.run_id, records, first_seq=arm.seq)
        arm.seq += len(records)


def split(config: GatewayConfig) -> list[dict[str, Any]]:
    """Per upstream: its arm, configured weight, ramp and model (what the router was told)."""
    return [
        {"upstream": u.name, "arm": u.arm, "weight": u.weight, "ramp_s": u.ramp_s, "model": u.model}
        for u in config.upstreams
    ]
