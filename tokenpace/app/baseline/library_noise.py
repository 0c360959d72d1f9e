"""Use case: the noise between runs that the library teaches. Every stored run measured like a given
one (the same test: model, API, load, workload, sampling -- ``gate_mismatches``) at the same target
(endpoint) and with the same labels (the same server version, region, ...) is a rerun of one
test: such runs form a group, and each group of two or more shows how much a percentile moves
between runs (``repeat_noise``). Explicit repeat groups (``bench --repeat``) add their stored
estimates. ``runnoise.pool`` pools them all and shrinks the result toward its stated prior."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenpace.adapters.store import RunInfo, Store
from tokenpace.core.analysis.comparison.conditions import gate_mismatches
from tokenpace.core.analysis.evidence.repeats import repeat_noise
from tokenpace.core.analysis.evidence.runnoise import GroupNoise

RUNS_SCANNED = 500  # the newest stored runs looked at (their conditions only)
MAX_LIBRARY_RUNS = 40  # runs whose records are read to learn the noise: the newest like the run
MAX_LIBRARY_RECORDS = 200_000  # and at most this many records in all (long gateway runs are big)
# Labels that name a run, not the server it measured: runs differing only in them are reruns.
RUN_LABELS = frozenset({"repeat", "block"})


def _group_key(run: RunInfo) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    return run.endpoint, tuple(sorted((k, v) for k, v in run.labels.items() if k not in RUN_LABELS))


def library_runs(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> list[list[str]]:
    """Groups (two or more run ids each, newest first) of judgeable stored runs measured like
    ``like``; runs of an explicit repeat group are left to its stored estimate."""
    skip = set(exclude)
    groups: dict[tuple[str | None, tuple[tuple[str, str], ...]], list[str]] = {}
    taken = records = 0
    for run in store.list_runs(limit=RUNS_SCANNED):
        if taken >= MAX_LIBRARY_RUNS:
            break
        if records + run.record_count > MAX_LIBRARY_RECORDS:
            continue
        if run.id in skip or not run.valid or run.interrupted or run.model != like.model:
            continue
        if gate_mismatches(like.conditions, run.conditions) or store.repeat_group_of(run.id):
            continue
        groups.setdefault(_group_key(run), []).append(run.id)
        taken += 1
        records += run.record_count
    return [ids for ids in groups.values() if len(ids) >= 2]


def library_noise(store: Store, like: RunInfo, exclude: Iterable[str] = ()) -> list[GroupNoise]:
    """What the library's reruns of ``like``'s test measured of the noise between runs."""
    out: list[GroupNoise] = []
    for ids in library_runs(store, like, exclude):
        out += repeat_noise([store.load_records(i) for i in ids])
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
