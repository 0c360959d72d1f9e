"""Use case: ``check --baseline NAME --max-regression ... --until-decided [--max-runs N]``: the
stored candidate is judged first, on the same always-valid intervals as ``bench --repeat auto``
(app/jobs/until_decided.py); only while that look is undecided is the candidate's test run again,
rebuilt from its stored conditions, until the gate decides, the candidate side holds ``max_runs``
runs (the stored ones included), or candidate runs alone cannot decide (the baseline side limits:
what would decide is computed for both sides, and the command that grows the baseline is said).
A test that cannot be rebuilt faithfully from what is stored (a dataset or trace workload, header
values, which are never stored, a ramp) is refused with the reason and the command that can repeat
it (``bench --repeat auto``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tokenpace.app.baseline.check import newest_matching_run, refuse_other_conditions
from tokenpace.app.baseline.compare import judgeable_members, not_judgeable_reasons
from tokenpace.app.baseline.library_noise import run_host
from tokenpace.app.baseline.store_ops import StoreError, open_store
from tokenpace.app.jobs.bench_job import BenchOutcome
from tokenpace.app.jobs.progress import RunProgress
from tokenpace.app.jobs.repeat_job import REPEAT_LABEL
from tokenpace.app.jobs.until_decided import DEFAULT_MAX_RUNS, BaselineRerun, UntilDecided, run_until_decided
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.run.outputs import RunOutputs
from tokenpace.core.analysis.comparison.gate import Threshold
from tokenpace.core.metrics import Slo
from tokenpace.core.workload.lengths import parse_length
from tokenpace.wire.dialects import DIALECTS, get_dialect
from tokenpace.wire.dialects.base import Sampling


class CannotRerun(ValueError):
    """The stored candidate's test cannot be rebuilt from its conditions."""


_HOW = {
    "candidate": "run the candidate again with: tokenpace bench ... --repeat auto --baseline NAME "
    "--max-regression ...",
    "baseline": "measure the baseline's build again with: tokenpace bench ... --repeat K, then "
    "tokenpace baseline set NAME RUN",
}


def rerun_config(conditions: dict[str, Any], side: str = "candidate") -> tuple[BenchConfig, str | None]:
    """The bench config (and simulator profile, when tokenpace started the engine) that measures
    again the test a stored run measured; CannotRerun with the reason when what is stored cannot
    say it. ``side``: whose test it is (said in the refusal)."""

    def refuse(why: str) -> CannotRerun:
        return CannotRerun(f"cannot run the {side}'s test again from what is stored: {why}; {_HOW[side]}")

    workload = conditions.get("workload") or {}
    if workload.get("kind") != "synthetic" or workload.get("tokenizer"):
        kind = workload.get("kind") or "unknown"
        raise refuse(f"its workload is {kind!r} (only synthetic lengths, no tokenizer, are stored whole)")
    shapes = (("shared_prefix", "shared prefixes"), ("sessions", "multi-turn sessions"))
    shaped = [name for key, name in shapes if key in workload]
    if shaped:
        raise refuse(f"its workload has {' and '.join(shaped)}, which are not rebuilt from the store")
    if conditions.get("headers"):
        raise refuse("it sent headers, whose values are never stored")
    load = conditions.get("load") or {}
    if load.get("ramp"):
        raise refuse("it ramped its load up")
    api = next((key for key in DIALECTS if get_dialect(key).name == conditions.get("api")), None)
    if api is None:
        raise refuse(f"its API {conditions.get('api')!r} is not known")
    target = str(conditions.get("target") or "external")
    profile = target.split(":", 1)[1] if target.startswith("sim:") else None
    url = "" if profile else str(conditions.get("endpoint") or "")
    if not url and not profile:
        raise refuse("no endpoint is stored")
    sampling = conditions.get("sampling") or {}
    slo = conditions.get("slo") or {}
    labels = {k: v for k, v in (conditions.get("labels") or {}).items() if k != REPEAT_LABEL}
    try:
        config = BenchConfig(
            url=url,
            model=conditions.get("model"),
            api=api,
            stream=bool(conditions.get("stream", True)),
            concurrency=load.get("concurrency"),
            rate=load.get("rate"),
            arrival=load.get("arrival") or "poisson",
            burstiness=load.get("burstiness") or 1.0,
            max_concurrency=load.get("max_concurrency"),
            requests=load.get("requests"),
            duration_s=load.get("duration_s"),
            warmup=int(load.get("warmup") or 0),
            timeout_s=float(load.get("timeout_s") or 300.0),
            input_len=parse_length(str(workload["input_len"]["spec"])),
            output_len=parse_length(str(workload["output_len"]["spec"])),
            seed=int(conditions.get("seed") or 0),
            prompt_salt=str(conditions.get("prompt_salt") or "auto"),
            sampling=Sampling(**sampling),
            slo=Slo(**slo),
            labels=labels,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise refuse(f"its stored conditions are incomplete ({type(exc).__name__}: {exc})") from None
    return config, profile


def baseline_rerun(
    conditions: dict[str, Any], baseline: str, url: str | None, as_stored: bool
) -> BaselineRerun | None:
    """How the baseline's build is measured again, from its stored conditions: at ``url`` (where
    the user serves it), or ``as_stored`` on the simulator profile it was measured on; None where
    neither was asked. ValueError where ``as_stored`` cannot say where the build runs."""
    if url is None and not as_stored:
        return None
    config, profile = rerun_config(conditions, "baseline")
    if url is not None:
        return BaselineRerun(replace(config, url=url), None, f"at {url}")
    if profile is None:
        raise ValueError(
            f"--rerun-baseline: baseline {baseline!r} was measured at {config.url}, which may serve "
            "another build now; give --baseline-url URL where the baseline's build is served"
        )
    return BaselineRerun(config, profile, f"on the simulator profile {profile}")


@dataclass
class CheckUntil:
    candidate: str  # the stored run checked first
    stored_runs: int  # the candidate side's stored runs (its repeat group, NOT VALID ones left out)
    done: UntilDecided

    @property
    def runs_added(self) -> int:
        return len(self.done.group.outcomes) if self.done.group else 0


def check_until_decided(
    store_url: str | None,
    baseline: str,
    thresholds: Sequence[Threshold],
    candidate: str | None = None,
    max_runs: int = DEFAULT_MAX_RUNS,
    alpha: float = 0.05,
    progress: RunProgress | None = None,
    on_run: Callable[[int, BenchOutcome], None] | None = None,
    baseline_url: str | None = None,
    rerun_baseline: bool = False,
    on_baseline_run: Callable[[int, BenchOutcome], None] | None = None,
) -> CheckUntil:
    """``baseline_url`` (the baseline's build served there) or ``rerun_baseline`` (on the
    simulator profile it was measured on): where the baseline side limits, its test is run again.
    Raises StoreError (unknown baseline or run), ValueError (a bad budget, a candidate that is
    NOT VALID or measured as another test, a baseline that cannot be run again as asked),
    CannotRerun, or what a run raises before its load."""
    if not 1 <= max_runs <= 20:
        raise ValueError("--max-runs must be between 1 and 20")
    store = open_store(store_url, existing=True)
    try:
        base = store.get_baseline(baseline)
        if base is None:
            raise StoreError(f"no baseline named {baseline!r}; set one: tokenpace baseline set")
        if candidate is None:
            candidate = newest_matching_run(store, base.run_id)
        else:
            refuse_other_conditions(store, base.run_id, candidate, baseline)
        run = store.resolve(candidate)
        group = store.repeat_group_of(run.id)
        ids, notes = judgeable_members(store, group[1] if group else [run.id])
        if len(ids) == 1 and (reasons := not_judgeable_reasons(store.resolve(ids[0]))):
            raise ValueError(f"run {ids[0]} is NOT VALID ({'; '.join(reasons)}): it cannot be judged")
        stored = [store.load_records(i) for i in ids]
        hosts = [run_host(store, i) for i in ids]
        conditions = run.conditions
        base_conditions = store.resolve(base.run_id).conditions
    finally:
        store.close()
    config, profile = rerun_config(conditions)  # refused before any look: the rule is the same either way
    grow = baseline_rerun(base_conditions, baseline, baseline_url, rerun_baseline)
    outputs = RunOutputs(store_url=store_url)
    done = run_until_decided(
        config, baseline, thresholds, max_runs, outputs, profile, progress, on_run, alpha, stored, hosts,
        grow, on_baseline_run,
    )  # fmt: skip
    done.notes[:0] = notes
    return CheckUntil(run.id, len(stored), done)


def what_would_decide(done: UntilDecided, baseline_runs: int) -> list[str]:
    """For each threshold left undecided, what would decide it, for both sides: from its interval,
    never from the point estimate (``sequential.side_needs``)."""
    lines = []
    for item in done.items:
        if item.outcome != "undecided":
            continue
        t, lk = item.threshold, item.look
        if lk is None:
            need = 500 if t.q > 95 else 100 if t.q > 50 else 10
            lines.append(
                f"{t.name}: too few samples beyond P{t.q:g} in some run: runs of at least {need} "
                "requests a side would decide it"
            )
            continue
        head = (
            f"{t.name}: its always-valid interval [{lk.rel_lo:+.1%}, {lk.rel_hi:+.1%}] still holds the "
            f"{t.limit:.0%} allowed after {lk.runs_a} baseline and {lk.runs_b} candidate run(s)"
        )
        if item.needs is None:  # within the threshold at an assumed noise
            lines.append(f"{head} only at an assumed noise between runs: a second candidate run shows it")
            continue
        cand, base = item.needs.candidate, item.needs.baseline
        sides = [
            f"{cand} more candidate run(s) with the baseline as it is"
            if cand is not None
            else f"no number of candidate runs with the baseline's {lk.runs_a} run(s)",
            f"{base} more baseline run(s) with the candidate as it is"
            if base is not None
            else "no number of baseline runs with the candidate as it is",
        ]
        lines.append(
            f"{head}; if the truth lies where the interval reaches farthest from the threshold, "
            f"{' or '.join(sides)} would decide it"
        )
    if done.baseline_limits:
        lines.append(grow_baseline(done, baseline_runs))
    return lines


def grow_baseline(done: UntilDecided, baseline_runs: int) -> str:
    """How many more runs the baseline side needs, why, and how to get them: measured again here
    (``--baseline-url``) or as a repeat group of its own that the baseline then points at."""
    more = done.baseline_needs
    need = (
        f"the baseline needs {more} more run(s)"
        if more
        else "the baseline needs more runs (neither side alone decides within 50 runs: both must grow)"
    )
    why = (
        "no number of candidate runs would decide it, so no more were run"
        if done.stopped_for_baseline
        else "neither side alone would decide it: both must grow"
        if done.both_limit
        else f"candidate runs alone cannot decide it within --max-runs {done.max_runs}"
    )
    if done.baseline_rerun is not None:
        how = (
            f"{done.baseline_added} baseline run(s) were measured again {done.baseline_rerun}, the "
            f"baseline side at most {done.max_runs} runs (--max-runs): raise --max-runs to measure more"
        )
    else:
        k = min(20, max(3, baseline_runs + (more or 0)))
        how = (
            "Let this check measure it again where its build is served (--baseline-url URL), or "
            f"measure it as a repeat group under the same conditions (tokenpace bench ... --repeat {k}), "
            f"point the baseline at it (tokenpace baseline set {done.baseline} RUN, RUN a run of that "
            "group), then check again"
        )
    return f"{need}: the baseline side limits the decision: {why}. {how}"
