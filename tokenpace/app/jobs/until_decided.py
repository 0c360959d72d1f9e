"""Use case: ``bench --repeat auto --baseline NAME --max-regression ...``: the candidate is run again
only while the gate against the baseline is undecided, up to ``--max-runs``. Each look judges every
threshold on an always-valid interval (``comparison/sequential_gate``), so stopping at the first
decision keeps the false-alarm rate at alpha. The noise between runs is learned before the first run
(the library's reruns of the baseline's test and its repeat groups, under the runs' host condition;
its upper bound, raised to what the sides' own runs show); a NOT VALID run is left out of the looks
with a note, and the rest decide. The side that limits the decision is the one run next: where
candidate runs alone cannot decide (the baseline's own term keeps the interval across the
threshold), the baseline's test is run again when the caller gave a way to (``BaselineRerun``:
``check --until-decided --baseline-url``), else the runs stop and the note says the baseline must
grow first. Each side's added runs are stored as a repeat group of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tokenpace.app.baseline.check import BASELINE_RERUN_LABEL
from tokenpace.app.baseline.compare import judgeable_members
from tokenpace.app.baseline.library_noise import learned_noise, run_host
from tokenpace.app.baseline.store_ops import StoreError, open_store
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.jobs.bench_job import BenchOutcome, run_bench_job
from tokenpace.app.jobs.progress import RunProgress
from tokenpace.app.jobs.repeat_job import MAX_REPEATS, REPEAT_LABEL, RepeatOutcome, close_group, run_path
from tokenpace.app.run.outputs import ExitStatus, RunOutputs, new_run_id
from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.analysis.comparison.sequential_gate import (
    SeqItem,
    baseline_limits,
    decided,
    sequential_gate,
    side_to_run,
)
from tokenpace.core.analysis.evidence.gate_noise import current_host
from tokenpace.core.analysis.evidence.runnoise import GroupNoise
from tokenpace.core.exit_codes import verdict_code
from tokenpace.core.record import RequestRecord

DEFAULT_MAX_RUNS = 6


@dataclass(frozen=True, slots=True)
class BaselineRerun:
    """How to measure the baseline's build again: its stored test, run where it is still served."""

    config: BenchConfig
    sim_profile: str | None  # the simulator profile tokenpace starts (None: the config's URL)
    where: str  # said to the user: "at URL", "on the simulator profile P"


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
    baseline_group: RepeatOutcome | None = None  # the baseline's runs measured again (BaselineRerun)
    baseline_rerun: str | None = None  # where the baseline could be measured again; None: nowhere

    @property
    def baseline_added(self) -> int:
        return len(self.baseline_group.outcomes) if self.baseline_group else 0

    @property
    def baseline_limits(self) -> bool:
        """Undecided, and candidate runs alone cannot decide within ``max_runs``: the baseline must
        grow (beyond what was run of it here, if anything)."""
        return self.outcome == "undecided" and (
            self.stopped_for_baseline or bool(baseline_limits(self.items, self.max_runs)) or self.both_limit
        )

    @property
    def baseline_needs(self) -> int | None:
        """More baseline runs that would decide every threshold the baseline side limits (the
        candidate side at its budget); None where no number within the cap would."""
        needs = [i.needs.baseline for i in self.items if i.outcome == "undecided" and i.needs is not None]
        return None if not needs or None in needs else max(n or 0 for n in needs)

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
    rerun_baseline: BaselineRerun | None = None,
    on_baseline_run: Callable[[int, BenchOutcome], None] | None = None,
) -> UntilDecided:
    """Run ``config`` until the gate decides, ``max_runs`` runs are spent, or candidate runs alone
    cannot decide within ``max_runs``. ``stored``: candidate runs already measured (``check
    --until-decided``; their host conditions ``stored_hosts``): the first look is at them alone,
    and they count in ``max_runs``. ``rerun_baseline``: where the baseline limits, its test is run
    again (the baseline side too at most ``max_runs`` runs, its stored ones included). Raises
    StoreError on an unknown baseline, ValueError on a bad budget."""
    if not 1 <= max_runs <= MAX_REPEATS:
        raise ValueError(f"--max-runs must be between 1 and {MAX_REPEATS}")
    outputs = outputs or RunOutputs()
    if outputs.vllm is not None:
        raise ValueError("--repeat writes one result per run: --vllm-json is not supported with it")
    ids, base_records, learned, hosts = _baseline_records(outputs.store_url, baseline)
    done = UntilDecided(baseline, ids, baseline_hosts=hosts, max_runs=max_runs)
    done.baseline_rerun = rerun_baseline.where if rerun_baseline else None
    sides = {"b": _Side(config, sim_profile, on_run, stored, stored_hosts)}
    if rerun_baseline is not None:
        extra = {BASELINE_RERUN_LABEL: baseline}
        sides["a"] = _Side(rerun_baseline.config, rerun_baseline.sim_profile, on_baseline_run, base_records,
                           hosts, extra)  # fmt: skip
    done.group = sides["b"].group
    done.baseline_group = sides["a"].group if "a" in sides else None

    def look() -> None:
        cand, base = sides["b"], sides.get("a")
        runs_a = base.records() if base else base_records
        host = current_host([*(base.hosts() if base else hosts), *cand.hosts()])
        done.items = sequential_gate(
            runs_a,
            cand.records(),
            thresholds,
            learned,
            alpha,
            rerun="".join(sides),
            host=host,
            budget=max_runs,
        )

    while True:
        if sides["b"].records():
            look()
        left = {k: max_runs - side.count for k, side in sides.items()}
        side = side_to_run(done.items, max_runs, left.get("a", 0), left["b"])
        if side is None and done.items and left["b"] > 0 and not decided(done.items):
            done.stopped_for_baseline = True  # no number of candidate runs would decide
        if side is None or not sides[side].run_one(outputs, progress):
            break
    for each in sides.values():
        close_group(each.group, outputs)
        done.notes += each.notes()
    if not done.items:
        done.notes.append("no valid candidate run to judge")
    return done


class _Side:
    """One side's runs: those stored, then those measured here (one repeat group)."""

    def __init__(
        self,
        config: BenchConfig,
        profile: str | None,
        on_run: Callable[[int, BenchOutcome], None] | None,
        stored: Sequence[Sequence[RequestRecord]],
        stored_hosts: Sequence[str | None],
        labels: dict[str, str] | None = None,
    ) -> None:
        self.group = RepeatOutcome(new_run_id(), [])
        self.config = replace(
            config, labels={**config.labels, **(labels or {}), REPEAT_LABEL: self.group.group_id}
        )
        self.profile, self.on_run = profile, on_run
        self.stored, self.stored_hosts = list(stored), list(stored_hosts)

    @property
    def count(self) -> int:
        """Runs on this side: the stored ones and every one measured here (NOT VALID ones too)."""
        return len(self.stored) + len(self.group.outcomes)

    def usable(self) -> list[BenchOutcome]:
        return [o for o in self.group.outcomes if o.exit_decision.code is ExitStatus.OK]

    def records(self) -> list[Sequence[RequestRecord]]:
        return [*self.stored, *(o.result.records for o in self.usable())]

    def hosts(self) -> list[str | None]:
        return [*self.stored_hosts, *(o.result.health.host for o in self.usable())]

    def run_one(self, outputs: RunOutputs, progress: RunProgress | None) -> bool:
        """One more run; False where it ended the sequence (interrupted, aborted, nothing succeeded)."""
        k = len(self.group.outcomes)
        outcome = run_bench_job(
            self.config, replace(outputs, out=run_path(outputs.out, k)), self.profile, progress
        )
        self.group.outcomes.append(outcome)
        if self.on_run is not None:
            self.on_run(k, outcome)
        return outcome.exit_decision.code in (ExitStatus.OK, ExitStatus.NOT_VALID)

    def notes(self) -> list[str]:
        left = [o for o in self.group.outcomes if o.exit_decision.code is ExitStatus.NOT_VALID]
        return [f"run {o.result.run_id} is NOT VALID: left out of the looks; the rest decide" for o in left]
