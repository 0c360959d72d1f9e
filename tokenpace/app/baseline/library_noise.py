"""Use case: the noise between runs that the library teaches. Every stored run measured like a given
one (the same test: model, API, load, workload, sampling -- ``gate_mismatches``) at the same target
(endpoint) and with the same labels (the same server version, region, ...) is a rerun of one
test: such runs form a group, and each group of two or more shows how much a percentile moves
between runs (``repeat_noise``). Explicit repeat groups (``bench --repeat``) add their stored
estimates. Each estimate carries the host condition its runs recorded (``gate_noise.host_class``:
a group of runs measured on a busy and a quiet host is two groups), so that a gate counts only
those measured like its own runs (``gate_noise.gate_noise``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenpace.adapters.store import RunInfo, Store
from tokenpace.core.analysis.comparison.conditions import gate_mismatches
from tokenpace.core.analysis.comparison.stored_levels import levels_noise
from tokenpace.core.analysis.evidence.gate_noise import current_host, summary_host, with_host
from tokenpace.core.analysis.evidence.repeats import repeat_noise
from tokenpace.core.analysis.evidence.runnoise import GroupNoise

RUNS_SCANNED = 500  # the newest stored runs looked at (their conditions only)
MAX_LIBRARY_RUNS = 40  # runs whose records are read to learn the noise: the newest like the run
MAX_LIBRARY_RECORDS = 200_000  # and at most this many records in all (long gateway runs are big)
# Labels that name a run, not the server it measured: runs differing only in them are reruns.
RUN_LABELS = frozenset({"repeat", "block"})


GroupKey = tuple[str | None, tuple[tuple[str, str], ...], str | None]


def _group_key(run: RunInfo, host: str | None) -> GroupKey:
    return run.endpoint, tuple(sorted((k, v) for k, v in run.labels.items() if k not in RUN_LABELS)), host


def run_host(store: Store, run_id: str) -> str | None:
    """The host condition a stored run recorded (None: not recorded, or no such run)."""
    run = store.get_run(run_id)
    return summary_host(run.summary) if run is not None else None


def runs_host(store: Store, run_ids: Iterable[str]) -> str | None:
    """The host condition of runs judged together: busy if any was (``gate_noise.current_host``)."""
    return current_host(run_host(store, i) for i in run_ids)


def library_groups(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> dict[GroupKey, list[str]]:
    """Groups (two or more run ids each, newest first) of judgeable stored runs measured like
    ``like``, by target, labels and host condition; runs of an explicit repeat group are left to its
    stored estimate."""
    skip = set(exclude)
    candidates = [
        run
        for run in store.list_runs(limit=RUNS_SCANNED)
        if run.id not in skip and run.valid and not run.interrupted and run.model == like.model
        and not gate_mismatches(like.conditions, run.conditions)
    ]  # fmt: skip
    grouped = store.grouped_runs([r.id for r in candidates])
    taken: list[RunInfo] = []
    records = 0
    for run in candidates:
        if len(taken) >= MAX_LIBRARY_RUNS:
            break
        if records + run.record_count > MAX_LIBRARY_RECORDS or run.id in grouped:
            continue
        taken.append(run)
        records += run.record_count
    summaries = store.run_summaries([r.id for r in taken])
    groups: dict[GroupKey, list[str]] = {}
    for run in taken:
        groups.setdefault(_group_key(run, summary_host(summaries.get(run.id, {}))), []).append(run.id)
    return {key: ids for key, ids in groups.items() if len(ids) >= 2}


def library_runs(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> list[list[str]]:
    """The run ids of ``library_groups``."""
    return list(library_groups(store, like, exclude).values())


def library_noise(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> list[GroupNoise]:
    """What the library's reruns of ``like``'s test measured of the noise between runs."""
    out: list[GroupNoise] = []
    for key, ids in library_groups(store, like, exclude).items():
        out += with_host(repeat_noise([store.load_records(i) for i in ids]), key[2])
    return out


def learned_noise(
    store: Store, like: RunInfo, groups: Sequence[str] = (), runs: Sequence[str] = ()
) -> list[GroupNoise]:
    """Every estimate for ``like``'s test: the stored repeat groups' (less ``groups``, the sides'
    own) and the library's reruns (less ``runs``, the sides' own)."""
    return [
        *store.learned_noise(like.conditions, like.model, list(groups)),
        *library_noise(store, like, runs),
    ]


def stored_library_noise(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> list[GroupNoise] | None:
    """``library_noise`` from the same runs' stored figures (no record read); None where one of
    them has none (saved before figures were kept, or by the gateway)."""
    groups = library_groups(store, like, exclude)
    ids = [i for g in groups.values() for i in g]
    levels = store.run_levels(ids)
    if any(i not in levels for i in ids):
        return None
    out: list[GroupNoise] = []
    for key, g in groups.items():
        out += with_host(levels_noise([levels[i] for i in g]), key[2])
    return out
