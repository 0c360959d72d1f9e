"""Use case: ``bench --repeat auto --baseline NAME --max-regression ...``: the candidate is run again
only while the gate against the baseline is undecided, up to ``--max-runs``. Each look judges every
threshold on an always-valid interval (``comparison/sequential_gate``), so stopping at the first
decision keeps the false-alarm rate at alpha. The noise between runs is learned before the first run
(the library's reruns of the baseline's test and its repeat groups, under the runs' host condition;
its upper bound, raised to what the sides' own runs show); a NOT VALID candidate run is left out of
the looks with a note, and the rest decide. When more candidate runs alone cannot decide (the
baseline's own term keeps the interval across the threshold) the runs stop: the baseline must grow
first, and the note says how."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tokenpace.app.baseline.compare import judgeable_members
from tokenpace.app.baseline.library_noise import learned_noise, run_host
from tokenpace.app.baseline.store_ops import StoreError, open_store
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.jobs.bench_job import BenchOutcome
from tokenpace.app.jobs.progress import RunProgress
from tokenpace.app.jobs.repeat_job import RepeatOutcome, run_repeated_bench
from tokenpace.app.run.outputs import ExitStatus, RunOutputs
from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.analysis.comparison.sequential_gate import (
    SeqItem,
    baseline_limits,
    decided,
    sequential_gate,
)
from tokenpace.core.analysis.evidence.gate_noise import current_host
from tokenpace.core.analysis.evidence.runnoise import MAX_RUNS_ADVISED, GroupNoise
from tokenpace.core.exit_codes import verdict_code
from tokenpace.core.record import RequestRecord

DEFAULT_MAX_RUNS = 6


@dataclass
class UntilDecided:
    baseline: str
    baseline_runs: list[str]
    group: RepeatOutcome | None = None
    items: list[SeqItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    baseline_hosts: list[str | None] = field(default_factory=list)
    max_runs: int = DEFAULT_MAX_RUNS
    stopped_for_baseline: bool = False  # no number of candidate runs could decide: stopped early

    @property
    def baseline_limits(self) -> bool:
        """Candidate runs alone cannot decide within ``max_runs``: the baseline must grow first."""
        return (
            self.stopped_for_baseline or bool(baseline_limits(self.items, self.max_runs)) or self.both_limit
        )

    @property
    def both_limit(self) -> bool:
        """Neither side alone decides some threshold: both must grow, the baseline too."""
        return any(i.outcome == "undecided" and i.needs and i.needs.limiting == "both" for i in self.items)

    @property
    def outcome(self) -> str:
        if any(i.outcome == "regressed" for i in self.items):
            return "regressed"
        if self.items and all(i.outcome == "pass" for i in self.items):
            return "pass"
        return "undecided"

    @property
    def exit_code(self) -> int:
        return int(verdict_code(self.outcome))


def _baseline_records(
    store_url: str | None, name: str
) -> tuple[list[str], list[list[RequestRecord]], list[GroupNoise], list[str | None]]:
    store = open_store(store_url, existing=True)
    try:
        base = store.get_baseline(name)
        if base is None:
            raise StoreError(f"no baseline named {name!r}; set one: tokenpace baseline set")
        run = store.resolve(base.run_id)
        group = store.repeat_group_of(run.id)
        ids, _ = judgeable_members(store, group[1] if group else [run.id])
        learned = learned_noise(store, run, (), ids)  # the baseline's own group is evidence too
        hosts = [run_host(store, i) for i in ids]
        return ids, [store.load_records(i) for i in ids], learned, hosts
    finally:
        store.close()


def run_until_decided(
    config: BenchConfig,
    baseline: str,
    thresholds: Sequence[Threshold],
    max_runs: int = DEFAULT_MAX_RUNS,
    outputs: RunOutputs | None = None,
    sim_profile: str | None = None,
    progress: RunProgress | None = None,
    on_run: Callable[[int, BenchOutcome], None] | None = None,
    alpha: float = 0.05,
    stored: Sequence[Sequence[RequestRecord]] = (),
    stored_hosts: Sequence[str | None] = (),
) -> UntilDecided:
    """Run ``config`` until the gate decides, ``max_runs`` runs are spent, or candidate runs alone
    cannot decide within ``max_runs``. ``stored``: candidate runs already measured (``check
    --until-decided``; their host conditions ``stored_hosts``): the first look is at them alone,
    and they count in ``max_runs``. Raises StoreError on an unknown baseline, ValueError on a bad budget."""
    store_url = outputs.store_url if outputs else None
    ids, base_records, learned, hosts = _baseline_records(store_url, baseline)
    done = UntilDecided(baseline, ids, baseline_hosts=hosts, max_runs=max_runs)

    def look(usable: list[BenchOutcome]) -> bool:
        candidate = [*stored, *(o.result.records for o in usable)]
        host = current_host([*hosts, *stored_hosts, *(o.result.health.host for o in usable)])
        done.items = sequential_gate(
            base_records, candidate, thresholds, learned, alpha, host=host, budget=max_runs
        )
        if decided(done.items):
            return True
        # stop only where no number of candidate runs would do (the estimate moves as runs come)
        done.stopped_for_baseline = bool(baseline_limits(done.items, MAX_RUNS_ADVISED))
        return done.stopped_for_baseline

    if stored and (look([]) or len(stored) >= max_runs):
        return done  # decided by the stored runs alone, no budget left, or the baseline limits
    more = max_runs - len(stored)
    done.group = run_repeated_bench(config, more, outputs, sim_profile, progress, on_run, until=look)
    left = [o for o in done.group.outcomes if o.exit_decision.code is ExitStatus.NOT_VALID]
    done.notes += [
        f"run {o.result.run_id} is NOT VALID: left out of the looks; the rest decide" for o in left
    ]
    if not done.items:
        done.notes.append("no valid candidate run to judge")
    return done
