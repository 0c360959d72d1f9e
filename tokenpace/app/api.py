"""tokenpace from Python: one call runs a benchmark (or a sweep) and gives the result back.

    from tokenpace.app.api import BenchConfig, run_bench

    result = run_bench(BenchConfig(url="", concurrency=4, requests=20))  # no URL: the simulated engine
    print(result.summary.ttft_ms.p95)

Nothing is written unless asked: ``out=`` writes the result file with its records beside it (the
files ``tokenpace bench --out`` writes), ``store=`` saves the run in that run store. Ctrl-C stops
the run early and the result comes back marked interrupted. Inside a running event loop (Jupyter,
an async service) call ``config.validate()`` then await ``BenchRun(config).run()`` instead
(``tokenpace.app.bench.bench``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tokenpace.app.baseline.run_store import RunStoreError
from tokenpace.app.jobs.bench_job import REFUSALS, run_bench_job
from tokenpace.app.jobs.progress import RunProgress, SweepProgress
from tokenpace.app.jobs.sweep_job import run_sweep_job
from tokenpace.app.run.bench_config import DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, BenchConfig, BenchResult
from tokenpace.app.run.outputs import RunOutputs
from tokenpace.app.sweep.sweep import SweepConfig, SweepResult

__all__ = [
    "REFUSALS",
    "BenchConfig",
    "BenchResult",
    "RunNotStored",
    "RunProgress",
    "SweepConfig",
    "SweepProgress",
    "SweepResult",
    "run_bench",
    "run_sweep",
]


class RunNotStored(RunStoreError):
    """The run was measured but the store refused it; the result is on the exception."""

    def __init__(self, message: str, result: BenchResult) -> None:
        super().__init__(message)
        self.result = result


def run_bench(
    config: BenchConfig,
    *,
    sim_profile: str | None = None,
    out: Path | str | None = None,
    store: str | None = None,
    progress: RunProgress | None = None,
) -> BenchResult:
    """Run one benchmark and return its result (records, summary, conditions, client health).

    ``config.url`` empty: tokenpace starts its simulated engine (``sim_profile``) for the run.
    Neither concurrency nor rate: closed loop at 16; neither requests nor duration: 200 requests.
    Raises ValueError for a bad config and one of ``REFUSALS`` when the target, the simulator or
    the store fails before any load; ``RunNotStored`` (carrying the result) when saving fails.
    """
    result_file = Path(out) if out is not None else None
    outputs = RunOutputs(result_file, result_file is not None, store, store is not None)
    outcome = run_bench_job(with_defaults(config), outputs, sim_profile, progress)
    saved = outcome.saved
    if saved is not None and not saved.ok:
        raise RunNotStored(f"could not store run {saved.run_id}: {saved.error}", outcome.result)
    return outcome.result


def run_sweep(
    config: SweepConfig,
    *,
    sim_profile: str | None = None,
    out: Path | str | None = None,
    store: str | None = None,
    progress: SweepProgress | None = None,
) -> SweepResult:
    """Run a sweep (one full bench run per step) and return it; files and store as ``run_bench``
    (a step the store refuses is kept in the result and in ``out``)."""
    result_file = Path(out) if out is not None else None
    outputs = RunOutputs(result_file, result_file is not None, store, store is not None)
    return run_sweep_job(config, outputs, sim_profile, progress).result


def with_defaults(config: BenchConfig) -> BenchConfig:
    """The config with the CLI's defaults for a load and a bound where none was given."""
    if config.concurrency is None and config.rate is None:
        config = dataclasses.replace(config, concurrency=DEFAULT_CONCURRENCY)
    if config.requests is None and config.duration_s is None:
        config = dataclasses.replace(config, requests=DEFAULT_REQUESTS)
    return config
