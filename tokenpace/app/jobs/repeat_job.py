"""Use case: ``bench --repeat K``: the same test run K times, each run stored as usual, and the group
stored with what it measured of the noise between runs (what ``compare``/``check``/``history`` use
to tell a change of the server from the wobble of reruns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.jobs.bench_job import BenchOutcome, run_bench_job
from tokenpace.app.jobs.progress import RunProgress
from tokenpace.app.run.exit_status import ExitDecision
from tokenpace.app.run.outputs import ExitStatus, RunOutputs, new_run_id
from tokenpace.core.analysis.evidence.repeats import repeat_noise
from tokenpace.core.analysis.evidence.runnoise import GroupNoise

MAX_REPEATS = 20  # every run's records are held until the group's noise is computed
REPEAT_LABEL = "repeat"


@dataclass
class RepeatOutcome:
    group_id: str
    outcomes: list[BenchOutcome]
    noise: list[GroupNoise] = field(default_factory=list)
    stored: str | None = None  # where the group was stored; None: not stored
    note: str | None = None  # why the group taught nothing, or could not be stored
    runs_used: int = 0  # successful runs the noise rests on

    @property
    def exit_decision(self) -> ExitDecision:
        """The first run that was no success decides; all successes: OK."""
        for o in self.outcomes:
            if o.exit_decision.code is not ExitStatus.OK:
                return o.exit_decision
        return self.outcomes[-1].exit_decision


def run_path(out: Path | None, index: int) -> Path | None:
    """Run ``index`` (0-based) of a group: ``r.json`` -> ``r.r1.json``, ``r.r2.json``..."""
    return None if out is None else out.with_name(f"{out.stem}.r{index + 1}{out.suffix}")


def run_repeated_bench(
    config: BenchConfig,
    repeats: int,
    outputs: RunOutputs | None = None,
    sim_profile: str | None = None,
    progress: RunProgress | None = None,
    on_run: Callable[[int, BenchOutcome], None] | None = None,
    until: Callable[[list[BenchOutcome]], bool] | None = None,
) -> RepeatOutcome:
    """Run ``config`` ``repeats`` times and store the finished runs as a group (NOT VALID ones too:
    their noise is the wider; a run interrupted, aborted or without success ends the group there).
    ``until``: asked after each finished run (the usable ones so far) whether to stop: repeats only
    while undecided, ``repeats`` then the budget. Raises ValueError on a bad count, or what
    ``run_bench_job`` raises before the first load."""
    if not (1 if until else 2) <= repeats <= MAX_REPEATS:
        raise ValueError(f"--repeat must be between 2 and {MAX_REPEATS} (--max-runs 1 to {MAX_REPEATS})")
    outputs = outputs or RunOutputs()
    if outputs.vllm is not None:
        raise ValueError("--repeat writes one result per run: --vllm-json is not supported with it")
    group_id = new_run_id()
    config = dataclasses.replace(config, labels={**config.labels, REPEAT_LABEL: group_id})
    done = RepeatOutcome(group_id, [])
    for k in range(repeats):
        run_outputs = dataclasses.replace(outputs, out=run_path(outputs.out, k))
        outcome = run_bench_job(config, run_outputs, sim_profile, progress)
        done.outcomes.append(outcome)
        if on_run is not None:
            on_run(k, outcome)
        if outcome.exit_decision.code not in (ExitStatus.OK, ExitStatus.NOT_VALID):
            break  # interrupted, aborted, nothing succeeded, or not stored: stop the group here
        if until is not None and until([o for o in done.outcomes if o.exit_decision.code is ExitStatus.OK]):
            break
    return close_group(done, outputs)


def close_group(done: RepeatOutcome, outputs: RunOutputs) -> RepeatOutcome:
    """The group's noise from its finished runs (NOT VALID ones too), stored with the group where
    its runs were stored; a note where it teaches nothing."""
    usable = [o for o in done.outcomes if o.exit_decision.code in (ExitStatus.OK, ExitStatus.NOT_VALID)]
    if len(usable) < 2:
        done.note = f"{len(usable)} finished run(s): the noise between runs needs at least 2"
        return done
    done.runs_used = len(usable)
    behind = sum(1 for o in usable if o.exit_decision.code is ExitStatus.NOT_VALID)
    if behind:  # kept: the client's stalls can only widen the estimate, never narrow it
        done.note = (
            f"{behind} of {len(usable)} runs are NOT VALID (the client fell behind): their stalls are in "
            "this noise estimate, which is wider for it; check leaves them out of the group it judges"
        )
    done.noise = repeat_noise([o.result.records for o in usable])
    if outputs.save and all(o.saved is not None and o.saved.ok for o in usable):
        _store_group(done, usable, outputs.store_url)
    return done


def _store_group(done: RepeatOutcome, usable: list[BenchOutcome], store_url: str | None) -> None:
    from tokenpace.adapters.store import StoreError
    from tokenpace.app.baseline.store_ops import open_store

    first = usable[0].result
    try:
        store = open_store(store_url, writable=True)
        try:
            ids = [o.result.run_id for o in usable]
            model = first.conditions.get("model")
            store.save_repeat_group(done.group_id, ids, first.conditions, model, done.noise)
            done.stored = store.display_url
        finally:
            store.close()
    except StoreError as exc:
        done.note = f"the runs are stored, but not their group: {exc}"
