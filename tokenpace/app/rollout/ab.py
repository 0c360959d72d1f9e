"""Use case: an A/B run that controls for drift.

The same seeded workload goes to both arms block by block: block k sends workload seed ``seed + k``
to A and to B back to back, in the order A,B then B,A then A,B ... (counterbalanced, so neither arm
always goes first) or in a seeded random order per block. Each arm's records are then analysed as
paired blocks (``core.analysis.abtest``) and can be stored as two runs, ``<id>-a`` and ``<id>-b``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.app.bench.bench import BenchConfig, BenchResult
from tokenpace.app.run.outputs import USER_STOP
from tokenpace.app.workers.run_factory import make_run
from tokenpace.app.workers.workers import AnyRun
from tokenpace.core.analysis.comparison.conditions import cache_warnings
from tokenpace.core.analysis.evidence.verdict import DEFAULT_MIN_EFFECT
from tokenpace.core.analysis.rollout.abtest import AbAnalysis, analyse_blocks, min_p_value
from tokenpace.core.credentials import strip_credentials
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord

ORDERS = ("alternate", "random")


@dataclass
class AbConfig:
    url_a: str
    url_b: str
    base: BenchConfig  # everything but the URL, the request count and the seed
    blocks: int = 10
    block_requests: int = 20
    order: str = "alternate"
    alpha: float = 0.05
    min_effect: float = DEFAULT_MIN_EFFECT
    percentiles: tuple[float, ...] = (50.0, 95.0, 99.0)

    def validate(self) -> None:
        if self.blocks < 2:
            raise ValueError("--blocks must be at least 2")
        if self.block_requests < 1:
            raise ValueError("--block-requests must be at least 1")
        if self.order not in ORDERS:
            raise ValueError(f"--order must be one of {', '.join(ORDERS)}")
        if not 0 < self.alpha < 1:
            raise ValueError("--alpha must be between 0 and 1")

    def warnings(self) -> list[str]:
        out = []
        if min_p_value(self.blocks) > self.alpha:
            out.append(
                f"{self.blocks} blocks cannot reach p < {self.alpha:g} (smallest p is "
                f"{min_p_value(self.blocks):.3g}): no verdict will be given; use at least 6 blocks"
            )
        return out


@dataclass
class AbResult:
    ab_id: str
    config: AbConfig
    order: list[str]  # "AB" or "BA" per block
    blocks: list[tuple[BenchResult, BenchResult]]  # (arm A, arm B) per completed block
    analysis: AbAnalysis | None
    interrupted: bool
    warnings: list[str] = field(default_factory=list)
    partial: dict[str, BenchResult] = field(default_factory=dict)  # arm -> its run in an unfinished block

    def records(self, arm: str) -> list[RequestRecord]:
        """Every record the arm measured, an unfinished block's included (they are not analysed)."""
        i = 0 if arm == "a" else 1
        out = [r for pair in self.blocks for r in pair[i].records]
        extra = self.partial.get(arm.upper())
        return out + (extra.records if extra is not None else [])

    def arm_run(self, arm: str) -> tuple[str, dict[str, Any], dict[str, Any], list[RequestRecord]]:
        """(run id, conditions, summary, records) of one arm over all blocks, for the store."""
        i = 0 if arm == "a" else 1
        first = self.blocks[0][i] if self.blocks else self.partial[arm.upper()]
        records = self.records(arm)
        conditions = dict(first.conditions)
        conditions["labels"] = {**first.conditions.get("labels", {}), "ab": self.ab_id, "arm": arm}
        conditions["ab"] = {
            "id": self.ab_id,
            "arm": arm,
            "blocks": len(self.blocks),
            "block_requests": self.config.block_requests,
            "order": self.order,
            "seeds": [pair[i].conditions.get("seed") for pair in self.blocks],
            "other_endpoint": strip_credentials(self.config.url_b if arm == "a" else self.config.url_a),
        }
        summary = summarize(records, self.config.base.slo).to_dict()
        return f"{self.ab_id}-{arm}", conditions, summary, records

    def to_dict(self) -> dict[str, Any]:
        return {
            "ab_id": self.ab_id,
            "arms": {"a": strip_credentials(self.config.url_a), "b": strip_credentials(self.config.url_b)},
            "blocks": len(self.blocks),
            "block_requests": self.config.block_requests,
            "order": self.order,
            "interrupted": self.interrupted,
            "warnings": self.warnings,
            "block_runs": [{"a": a.run_id, "b": b.run_id} for a, b in self.blocks],
            "analysis": self.analysis.to_dict() if self.analysis else None,
        }


def block_order(blocks: int, order: str, seed: int) -> list[str]:
    if order == "random":
        rng = np.random.default_rng(seed)
        return ["AB" if x else "BA" for x in rng.random(blocks) < 0.5]
    return ["AB" if k % 2 == 0 else "BA" for k in range(blocks)]


class AbRun:
    """Runs the blocks one after another; ``stop()`` ends the current block and the run."""

    def __init__(self, config: AbConfig, on_block: Callable[[int, str, BenchResult], None] | None = None):
        self.config = config  # validated by the job (``ab_job``), once
        self.ab_id = uuid.uuid4().hex[:12]
        self.on_block = on_block
        self._current: AnyRun | None = None
        self._stopped = False

    def stop(self, reason: str = USER_STOP) -> None:
        self._stopped = True
        if self._current is not None:
            self._current.stop(reason)

    async def _arm(self, url: str, arm: str, block: int) -> BenchResult:
        cfg = self.config
        labels = {**cfg.base.labels, "ab": self.ab_id, "arm": arm.lower(), "block": str(block)}
        bench = dataclasses.replace(
            cfg.base,
            url=url,
            requests=cfg.block_requests,
            duration_s=None,
            seed=cfg.base.seed + block,
            labels=labels,
            request_id_prefix=None,
        )
        self._current = make_run(bench)
        return await self._current.run()

    async def run(self) -> AbResult:
        cfg = self.config
        order = block_order(cfg.blocks, cfg.order, cfg.base.seed)
        done: list[tuple[BenchResult, BenchResult]] = []
        partial: dict[str, BenchResult] = {}
        interrupted = False
        results: dict[str, BenchResult] = {}
        for k, first_second in enumerate(order):
            results = {}
            for arm in first_second:
                if self._stopped:
                    break
                results[arm] = await self._arm(cfg.url_a if arm == "A" else cfg.url_b, arm, k)
                if self.on_block is not None:
                    self.on_block(k, arm, results[arm])
            if len(results) == 2 and not any(r.interrupted for r in results.values()):
                done.append((results["A"], results["B"]))
            else:
                partial = results
            if self._stopped or partial:
                interrupted = True
                break
        warnings = cfg.warnings() + _cache_warnings(done)
        if interrupted:
            warnings.append(f"interrupted: {len(done)} of {cfg.blocks} blocks complete, analysed alone")
        analysis = None
        if done:
            analysis = analyse_blocks(
                [(a.records, b.records) for a, b in done],
                percentiles=cfg.percentiles,
                alpha=cfg.alpha,
                min_effect=cfg.min_effect,
                seed=cfg.base.seed,
            )
        return AbResult(self.ab_id, cfg, order[: len(done)], done, analysis, interrupted, warnings, partial)


def _hit_rate(result: BenchResult) -> float | None:
    counters = (result.observed.get("server_metrics") or {}).get("counters") or {}
    rate = counters.get("prefix_hit_rate")
    return float(rate) if isinstance(rate, (int, float)) else None


def _cache_warnings(blocks: list[tuple[BenchResult, BenchResult]]) -> list[str]:
    """An arm measured warmer than the other (mean prefix-cache hit rate over the blocks), or arms
    run with different prompt-salt settings."""
    if not blocks:
        return []
    summaries = []
    for side in (0, 1):
        rates = [r for pair in blocks if (r := _hit_rate(pair[side])) is not None]
        summaries.append({"server": {"prefix_hit_rate": sum(rates) / len(rates)}} if rates else {})
    a, b = blocks[0]
    return cache_warnings(a.conditions, b.conditions, summaries[0], summaries[1])
