"""The run store as the rest of tokenpace sees it: the ``Store`` protocol and the rows it returns.

The gateway, the app and the CLI type against ``Store``, never against SQL: ``SqlStore`` (SQLite,
PostgreSQL) is one implementation, and another backend is one class that has these methods. Every
failure is a ``StoreError`` with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenpace.core.analysis.comparison.stored_levels import RunLevel
from tokenpace.core.analysis.evidence.runnoise import GroupNoise
from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.record import RequestRecord


@dataclass(slots=True)
class RunInfo:
    id: str
    kind: str
    started_at: str
    started_unix: float
    stored_unix: float
    model: str | None
    endpoint: str | None
    tool_version: str | None
    interrupted: bool
    valid: bool
    stop_reason: str | None
    record_count: int
    labels: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, full: bool = True) -> dict[str, Any]:
        skip = () if full else ("conditions", "summary", "extra")
        return {k: getattr(self, k) for k in self.__slots__ if k not in skip}


@dataclass(frozen=True, slots=True)
class BaselineInfo:
    name: str
    run_id: str
    set_unix: float


@dataclass(frozen=True, slots=True)
class FleetState:
    """A gateway fleet's desired configuration as stored: its epoch only grows."""

    fleet: str
    epoch: int
    unix_s: float  # when it was set
    desired: dict[str, Any]  # the live settings, without credentials (gateway/config/shared.py)


@dataclass(frozen=True, slots=True)
class LiveRun:
    """A run in progress (or lately ended) and its figures so far (``diagnosis/live_figures.py``)."""

    run_id: str
    kind: str
    started_unix: float
    updated_unix: float  # the last publish: a row not ended whose time stops moving is a dead run
    state: str  # running, or how it ended (completed, interrupted: ..., aborted: ...)
    ended: bool
    labels: dict[str, str]
    figures: dict[str, Any]


class Store(Protocol):
    """Runs (conditions, summary, labels, records), baselines, outcome events, configuration changes."""

    @property
    def url(self) -> str: ...

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        ...

    @property
    def migrated_from(self) -> int:
        """The schema version found on opening (the current one when nothing was migrated)."""
        ...

    def close(self) -> None: ...

    def check_writable(self) -> None:
        """Fails with StoreError when the store cannot be written (read-only file, no rights)."""

    def schema_version(self) -> int: ...

    def save_run(
        self,
        run_id: str,
        conditions: Mapping[str, Any],
        summary: Mapping[str, Any],
        records: Sequence[RequestRecord],
        *,
        kind: str = "bench",
        labels: Mapping[str, str] | None = None,
        interrupted: bool = False,
        valid: bool = True,
        stop_reason: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Store a run and all its records at once: all of it is stored, or nothing."""

    def append_records(self, run_id: str, records: Sequence[RequestRecord], first_seq: int) -> None:
        """Add records to a stored run, numbered from ``first_seq``, with its record count, at once."""

    def set_summary(self, run_id: str, summary: Mapping[str, Any]) -> None: ...

    def list_runs(
        self,
        where: Mapping[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        newest_first: bool = True,
        full: bool = False,
    ) -> list[RunInfo]:
        """Runs matching every ``where`` item (labels, columns, dotted conditions) within the times."""
        ...

    def get_run(self, run_id: str) -> RunInfo | None: ...

    def resolve(self, ref: str) -> RunInfo:
        """A run by id, baseline name, ``key=value[,...]`` (newest match), unique id prefix or ``latest``."""
        ...

    def load_records(self, run_id: str) -> list[RequestRecord]: ...

    def record_counts(self, run_id: str) -> dict[str, int]:
        """Records by status, warm-up included under ``warmup``; ``total`` is every record."""
        ...

    def set_labels(self, run_id: str, labels: Mapping[str, str]) -> None: ...

    def remove_labels(self, run_id: str, keys: Sequence[str]) -> None: ...

    def delete_run(self, run_id: str) -> None: ...

    def set_baseline(self, name: str, run_id: str) -> None: ...

    def unset_baseline(self, name: str) -> bool: ...

    def get_baseline(self, name: str) -> BaselineInfo | None: ...

    def baselines(self) -> list[BaselineInfo]: ...

    def save_events(self, events: Sequence[OutcomeEvent]) -> None: ...

    def save_repeat_group(
        self,
        group_id: str,
        run_ids: Sequence[str],
        conditions: Mapping[str, Any],
        model: str | None,
        estimates: Sequence[GroupNoise],
    ) -> None: ...

    def repeat_group_of(self, run_id: str) -> tuple[str, list[str]] | None: ...

    def learned_noise(
        self, conditions: Mapping[str, Any], model: str | None, exclude: Sequence[str] = ()
    ) -> list[GroupNoise]: ...

    def save_config_change(self, change: ConfigChange) -> None:
        """A running gateway's configuration change (who, when, before, after)."""
        ...

    def load_config_changes(
        self, since_unix: float, until_unix: float | None = None, sessions: Sequence[str] | None = None
    ) -> list[ConfigChange]:
        """Changes made in [since, until), oldest first, optionally of some gateway sessions only."""
        ...

    def join_fleet(self, fleet: str, desired: dict[str, Any]) -> FleetState:
        """The fleet's desired configuration; ``desired`` as its epoch 0 where it has none yet."""
        ...

    def fleet_epoch(self, fleet: str) -> int | None:
        """The fleet's current epoch, None for no such fleet."""
        ...

    def fleet_config(self, fleet: str) -> FleetState | None: ...

    def set_fleet_config(self, fleet: str, desired: dict[str, Any], change: ConfigChange) -> bool:
        """Compare-and-set: ``desired`` at ``change.epoch`` (and the change stored) only where the
        fleet is at the epoch below it; False where another change came first."""
        ...

    def event_names(self) -> list[str]:
        """Every event name the store has ever received."""
        ...

    def load_events(
        self, since_unix: float, until_unix: float | None = None, sessions: Sequence[str] | None = None
    ) -> list[OutcomeEvent]:
        """Events received in [since, until), oldest first, optionally of some gateway sessions only."""
        ...

    def page_runs(self, query: RunQuery) -> RunPage:
        """One bounded page of runs (newest first) with their summaries, and how many matched."""
        ...

    def sample_records(self, run_id: str, limit: int) -> list[RequestRecord]:
        """At most ``limit`` of a run's records, evenly spaced in the order they finished."""
        ...

    def start_live(self, run_id: str, kind: str, labels: Mapping[str, str]) -> None:
        """A run in progress gets its live row (rows not written for a day are removed)."""

    def publish_live(
        self, run_id: str, figures: Mapping[str, Any], state: str = "running", ended: bool = False
    ) -> None:
        """The run's figures so far, in place of the last ones; ``ended`` with its final state."""

    def live_runs(self, ended: bool | None = None) -> list[LiveRun]:
        """Runs in progress (``ended=False``), lately ended (True) or both, the newest first."""
        ...

    def get_live(self, run_id: str) -> LiveRun | None: ...

    def save_levels(self, run_id: str, levels: Sequence[RunLevel]) -> None:
        """A stored run's figures (``comparison/stored_levels.py``), in place of any it had."""
        ...

    def run_levels(self, run_ids: Sequence[str]) -> dict[str, dict[str, RunLevel]]:
        """The stored figures of each run that has them, by run id and key."""
        ...

    def run_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored summaries of the runs still stored, by run id."""
        ...

    def grouped_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Those of ``run_ids`` that belong to a repeat group."""
        ...


PAGE_ROWS_MAX = 500  # runs in one page of page_runs
SCAN_MAX = 20_000  # newest runs whose conditions are read to match condition filters


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Filters of a page of runs: labels exact, conditions as ``key=value`` on columns or dotted
    condition fields, the start time, validity, kinds (``repeat``: runs of a repeat group)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)
    since: float | None = None
    until: float | None = None
    valid: bool | None = None
    kinds: Sequence[str] = ()
    offset: int = 0
    limit: int = 50


@dataclass(slots=True)
class RunPage:
    runs: list[RunInfo]
    total: int  # runs that matched (within the SCAN_MAX newest when conditions were matched)
    scanned_all: bool = True  # False when condition filters stopped at SCAN_MAX runs
    groups: dict[str, str] = field(default_factory=dict)  # run id -> its repeat group, where it has one
