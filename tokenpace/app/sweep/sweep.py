"""Use case: a sweep — one full bench run per load step, same workload and seed — and its capacity.

Steps are given (``--concurrency 1,2,4`` or ``--rate 1,2,5``) or placed automatically:
- auto, concurrency: double the concurrency from 1 until throughput stops growing (less than
  ``plateau_gain`` more for twice the users), errors climb or the SLO is broken by far;
- auto, rate: the same doubling in closed loop first (the *probe*, kept in the result) finds the maximum
  sustainable throughput X; then open-loop rate steps are placed from ``low_fraction`` x X up to X,
  denser near X where the knee is.
Any sweep stops early when a step's error rate exceeds ``stop_error_rate`` or a percentile of the SLO
is ``slo_break_factor`` times over its limit (unless ``keep_going``). ``stop()`` ends the step in
progress (kept, marked interrupted) and the sweep.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tokenpace import __version__
from tokenpace.app.bench.bench import BenchConfig, BenchResult
from tokenpace.app.run.outputs import USER_STOP
from tokenpace.app.sweep.sweep_capacity import capacity as capacity
from tokenpace.app.sweep.sweep_lengthen import MAX_RERUNS, is_short, lengthened, step_rps
from tokenpace.app.workers.run_factory import make_run
from tokenpace.app.workers.workers import AnyRun
from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.analysis.capacity.plan import DEFAULT_HEADROOM, DEFAULT_MAX_ERROR_RATE
from tokenpace.core.analysis.selection.prefill_fit import fit_records
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.lengths import parse_length

MODES = ("concurrency", "rate", "input_len")  # input_len: prompt lengths at a fixed load
REVISIT_MIN_STEPS = 3  # a shorter curve is not revisited (drift would barely change its reading)


@dataclass
class SweepConfig:
    base: BenchConfig  # target, workload, per-step bounds; its concurrency/rate are replaced per step
    mode: str = "concurrency"
    steps: list[float] = field(default_factory=list)
    auto: bool = False
    auto_steps: int = 8  # open-loop steps placed after the probe (auto, rate)
    low_fraction: float = 0.1
    max_probe_concurrency: int = 1024
    plateau_gain: float = 0.1
    stop_error_rate: float = 0.05
    slo_break_factor: float = 3.0
    keep_going: bool = False
    slo_percentile: str = "p95"
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE  # for the sustainable load and the SLO capacity
    peak_rps: float | None = None
    headroom: float = DEFAULT_HEADROOM
    revisit: bool = True  # run the first curve step again after the last: latency that moved with time

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"sweep mode must be one of {', '.join(MODES)}")
        if self.auto and self.steps:
            raise ValueError("--auto places the steps itself: drop the list of steps")
        if not self.auto and not self.steps:
            raise ValueError("give the steps (--concurrency 1,2,4 or --rate 1,2,5) or --auto")
        for s in self.steps:
            if s <= 0:
                raise ValueError(f"step {s:g}: loads must be positive")
            if self.mode in ("concurrency", "input_len") and s != int(s):
                raise ValueError(f"step {s:g}: {self.mode.replace('_', ' ')} must be a whole number")
        if self.mode == "input_len" and self.auto:
            raise ValueError("an input-length sweep takes its lengths as a list (--input-len 512,1024,2048)")
        if self.slo_percentile not in ("p50", "p90", "p95", "p99"):
            raise ValueError("SLO percentile must be p50, p90, p95 or p99")
        if not 0 <= self.headroom < 1:
            raise ValueError("headroom must be at least 0% and below 100%")
        if self.peak_rps is not None and self.peak_rps <= 0:
            raise ValueError("--peak-rps must be positive")
        if self.auto_steps < 2:
            raise ValueError("--auto-steps must be at least 2")
        probe = dataclasses.replace(self.base, concurrency=1, rate=None)
        probe.validate()


@dataclass
class SweepStep:
    index: int  # 1-based, in the order run (probe steps and short attempts included)
    phase: str  # "step" (on the curve), "probe" (finding the maximum, closed loop) or "revisit"
    mode: str  # concurrency | rate
    load: float
    result: BenchResult
    superseded: bool = False  # too short: rerun longer (--auto); kept, off the curve
    lengthened: int = 1  # requests (or duration) x this, against the sweep's own

    def to_dict(self, records_file: str | None) -> dict[str, Any]:
        out = self.result.to_dict(records_file=records_file)
        out["sweep_step"] = {
            "index": self.index,
            "phase": self.phase,
            "mode": self.mode,
            "load": self.load,
            "lengthened": self.lengthened,
            "superseded_as_short": self.superseded,
        }
        out["time_trend"] = trend_dict(self.result.records, self.mode == "rate")
        return out


@dataclass
class SweepResult:
    sweep_id: str
    config: SweepConfig
    started_at: str
    steps: list[SweepStep]
    interrupted: bool
    stop_reason: str
    plateau_rps: float | None = None  # where the closed-loop doubling levelled off (auto), if it did

    def curve(self) -> list[SweepStep]:
        return [s for s in self.steps if s.phase == "step" and not s.superseded]

    def to_dict(self, records_files: dict[int, str] | None = None) -> dict[str, Any]:
        files = records_files or {}
        cfg = self.config
        step_dicts = [s.to_dict(files.get(s.index)) for s in self.steps]
        kept = [d for d in step_dicts if not d["sweep_step"]["superseded_as_short"]]
        curve = [d for d in kept if d["sweep_step"]["phase"] == "step"]
        return {
            "kind": "sweep",
            "tokenpace_version": __version__,
            "sweep_id": self.sweep_id,
            "mode": cfg.mode,
            "auto": cfg.auto,
            "started_at": self.started_at,
            "interrupted": self.interrupted,
            "stop_reason": self.stop_reason,
            "slo": cfg.base.slo.to_dict(),
            "slo_percentile": cfg.slo_percentile,
            "steps": curve,
            "probe": [d for d in kept if d["sweep_step"]["phase"] == "probe"],
            "revisit": [d for d in kept if d["sweep_step"]["phase"] == "revisit"],
            "short_attempts": [d for d in step_dicts if d["sweep_step"]["superseded_as_short"]],
            "probe_plateau_rps": self.plateau_rps,
            **(
                input_len_analysis(self.curve())
                if cfg.mode == "input_len"
                else capacity(
                    curve,
                    cfg.base.slo.to_dict(),
                    cfg.slo_percentile,
                    cfg.max_error_rate,
                    cfg.peak_rps,
                    cfg.headroom,
                    self.plateau_rps,
                    next((d for d in kept if d["sweep_step"]["phase"] == "revisit"), None),
                    [s.result.records for s in self.curve()],
                    off_curve=[d for d in kept if d["sweep_step"]["phase"] == "probe"]
                    + [d for d in step_dicts if d["sweep_step"]["superseded_as_short"]],
                )
            ),
        }


def input_len_analysis(steps: list[SweepStep]) -> dict[str, Any]:
    """An input-length sweep's prefill fit (TTFT on input tokens) over every step's requests."""
    records = [r for step in steps for r in step.result.records]
    try:
        return {"prefill_fit": fit_records(records).to_dict()}
    except ValueError as exc:
        return {"prefill_fit": None, "prefill_fit_reason": str(exc)}


def rate_steps(max_rps: float, n: int, low_fraction: float = 0.1) -> list[float]:
    """n open-loop rates from low_fraction x max to max, denser near the max (3 significant digits)."""
    out: list[float] = []
    for i in range(n):
        frac = low_fraction + (1 - low_fraction) * (i / (n - 1)) ** 0.6
        rate = float(f"{max_rps * frac:.3g}")
        if rate > 0 and rate not in out:
            out.append(rate)
    return out


class Sweep:
    """A sweep in progress. Callbacks let the caller write records and show progress."""

    def __init__(
        self,
        config: SweepConfig,
        sweep_id: str | None = None,
        on_step_start: Callable[[int, str, str, float, AnyRun], None] | None = None,
        on_record: Callable[[int, RequestRecord], None] | None = None,
        on_step_done: Callable[[SweepStep], None] | None = None,
    ) -> None:
        self.config = config  # validated by the job (``sweep_job``), once
        self.sweep_id = sweep_id or uuid.uuid4().hex[:12]
        self.on_step_start = on_step_start
        self.on_record = on_record
        self.on_step_done = on_step_done
        self.steps: list[SweepStep] = []
        self._current: AnyRun | None = None
        self._stopped = False
        self._interrupted = False
        self._stop_reason = ""
        self._done = False
        self._plateau_rps: float | None = None
        self.started_at = datetime.now(timezone.utc).isoformat()

    def stop(self, reason: str = USER_STOP) -> None:
        if not self._stopped:
            self._stopped = True
            self._interrupted = reason.startswith("interrupted")
            self._stop_reason = reason
        if self._current is not None:
            self._current.stop(reason)

    def snapshot(self) -> SweepResult:
        """The sweep so far (finished steps), e.g. to save after each step."""
        return SweepResult(
            self.sweep_id,
            self.config,
            self.started_at,
            list(self.steps),
            self._interrupted,
            self._stop_reason or ("completed" if self._done else "in progress"),
            self._plateau_rps,
        )

    async def run(self) -> SweepResult:
        self.started_at = datetime.now(timezone.utc).isoformat()
        cfg = self.config
        if not cfg.auto:
            for i, load in enumerate(cfg.steps):
                if not await self._step("step", cfg.mode, load, last=i == len(cfg.steps) - 1):
                    break
        elif cfg.mode == "concurrency":
            await self._probe("step")
        else:
            best = await self._probe("probe")
            if best is not None and not self._stopped:
                for rate in rate_steps(best, cfg.auto_steps, cfg.low_fraction):
                    if not await self._step("step", "rate", rate):
                        break
            elif best is None and not self._stopped:
                self._stop_reason = "the probe found no sustainable load: no rate steps placed"
        await self._revisit()
        self._done = True
        return self.snapshot()

    async def _revisit(self) -> None:
        """The first curve step again, after the last: the same load, so the same latency unless it
        moved with time (``core.analysis.drift``)."""
        curve = self.snapshot().curve()
        cfg = self.config
        if not cfg.revisit or cfg.mode == "input_len" or self._stopped or len(curve) < REVISIT_MIN_STEPS:
            return
        first = curve[0]
        await self._step("revisit", first.mode, first.load, last=True)

    async def _probe(self, phase: str) -> float | None:
        """Closed-loop doubling from 1 until throughput plateaus; returns the best sustainable rps."""
        cfg = self.config
        best: float | None = None
        c = 1
        while c <= cfg.max_probe_concurrency:
            ok = await self._step(phase, "concurrency", float(c))
            result = self.steps[-1].result
            summary = result.summary
            rps = step_rps(result)
            if summary.error_rate <= cfg.stop_error_rate and rps > 0:
                if best is not None and rps < best * (1 + cfg.plateau_gain):
                    best = max(best, rps)
                    self._plateau_rps = best
                    if not self._stopped and phase == "step":
                        self._stop_reason = (
                            f"throughput plateaued at concurrency {c} ({rps:.3g} req/s, "
                            f"less than {cfg.plateau_gain:.0%} over concurrency {c // 2})"
                        )
                    break
                best = max(best or 0.0, rps)
            if not ok:  # stopped, or errors/SLO too far: the probe ends (a rate sweep goes on)
                break
            c *= 2
        return best

    async def _step(self, phase: str, mode: str, load: float, last: bool = False) -> bool:
        """Run one step (rerun longer while too short, --auto); False when the sweep must stop after it."""
        if self._stopped:
            return False
        cfg = self.config
        if mode == "input_len":  # the base's fixed load; only the prompt length steps
            bench_cfg = dataclasses.replace(cfg.base, input_len=parse_length(str(int(load))))
        elif mode == "concurrency":
            bench_cfg = dataclasses.replace(cfg.base, concurrency=int(load), rate=None)
        else:
            bench_cfg = dataclasses.replace(cfg.base, rate=load, concurrency=None)
        factor, reruns = 1, 0
        while True:
            result = await self._run_step(bench_cfg, phase, mode, load)
            longer = None
            if cfg.auto and reruns < MAX_RERUNS and is_short(result) and not self._ended(result):
                longer = lengthened(bench_cfg, result, factor)
            step = SweepStep(len(self.steps) + 1, phase, mode, load, result, longer is not None, factor)
            self.steps.append(step)
            if self.on_step_done is not None:
                self.on_step_done(step)
            if longer is None:
                break
            bench_cfg, factor = longer
            reruns += 1
        return self._after_step(step, phase, last)

    def _ended(self, result: BenchResult) -> bool:
        return self._stopped or result.interrupted or result.stop_reason.startswith("aborted")

    async def _run_step(self, bench_cfg: BenchConfig, phase: str, mode: str, load: float) -> BenchResult:
        index = len(self.steps) + 1
        labels = {**self.config.base.labels, "sweep_id": self.sweep_id, "sweep_step": str(index)}
        if phase == "revisit":  # stored with the sweep, but off its curve (select leaves it out)
            labels["sweep_phase"] = "revisit"
        bench_cfg = dataclasses.replace(bench_cfg, labels=labels)
        on_record = None
        if self.on_record is not None:
            hook = self.on_record

            def on_record(record: RequestRecord) -> None:
                hook(index, record)

        bench_cfg.validate()  # each step is a bench of its own, validated once
        run = make_run(bench_cfg, on_record=on_record, run_id=f"{self.sweep_id}-{index:02d}")
        self._current = run
        if self.on_step_start is not None:
            self.on_step_start(index, phase, mode, load, run)
        try:
            return await run.run()
        finally:
            self._current = None

    def _after_step(self, step: SweepStep, phase: str, last: bool = False) -> bool:
        result, index, cfg = step.result, step.index, self.config
        if result.interrupted or self._stopped:
            if not self._stopped:
                self.stop(result.stop_reason)
            return False
        if result.stop_reason.startswith("aborted"):
            self._stopped = True
            self._stop_reason = f"step {index}: {result.stop_reason}"
            return False
        reason = self._too_far(result)
        if reason and (phase == "probe" or not cfg.keep_going):
            if phase == "step" and not last:  # after the last step nothing was skipped
                self._stop_reason = f"stopped early after step {index}: {reason}"
            return False
        return True

    def _too_far(self, result: BenchResult) -> str | None:
        cfg = self.config
        s = result.summary
        if s.error_rate > cfg.stop_error_rate:
            return f"errors climbed to {s.error_rate:.0%} (limit {cfg.stop_error_rate:.0%})"
        for metric, limit in cfg.base.slo.to_dict().items():
            value = getattr(s, metric).percentile(cfg.slo_percentile)
            if value is not None and value > limit * cfg.slo_break_factor:
                name = metric.removesuffix("_ms").upper()
                return (
                    f"{name} {cfg.slo_percentile.upper()} {value:.0f} ms is over "
                    f"{cfg.slo_break_factor:g}x its SLO of {limit:.0f} ms"
                )
        return None
