"""The run a config asks for: one process, worker processes (``--workers``) or Ray actors (``--ray``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenpace.app.bench.bench import BenchRun
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.workers.workers import AnyRun, WorkerRun
from tokenpace.core.record import RequestRecord


def make_run(
    config: BenchConfig,
    on_record: Callable[[RequestRecord], None] | None = None,
    run_id: str | None = None,
    scrape_path: Path | None = None,
) -> AnyRun:
    """The config is valid: the job that owns the run validated it, once."""
    if config.ray is not None:
        from tokenpace.app.workers.ray_workers import RayWorkerRun, require_ray  # Ray only when asked for

        require_ray()
        return RayWorkerRun(config, on_record, run_id, scrape_path)
    if config.workers == 1:
        return BenchRun(config, on_record, run_id, scrape_path)
    return WorkerRun(config, on_record, run_id, scrape_path)
