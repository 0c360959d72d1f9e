"""The change's SE from shared time blocks on a real engine's run (tests/data/engines/h200: Hugging
Face `transformers serve` with continuous batching on an H200, Poisson arrivals at 17 req/s, see its
README): its requests split into two pseudo-arms on the one engine, so the true change is zero, or
exactly a known factor where one arm's latencies are scaled. Each request's load at dispatch is what
a gateway would record: the run's other requests in flight on the engine when it was sent. The
arms are compared at matched load with the joint SE; the interval covers the truth, never rests on
an SE under the floor (per-request sampling times the change's own dependence), and decides where
the data have the power to."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

import numpy as np

from tokenpace.core.analysis.evidence.verdict import Verdict
from tokenpace.core.analysis.rollout.arms import HOLD, ROLL_BACK, ArmsReport, analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.joint_blocks import JointSE, joint_ses
from tokenpace.core.analysis.rollout.load_match import MATCHED, LoadMatch, match_load, matched_change
from tokenpace.core.record import RequestRecord

DATA = Path(__file__).resolve().parents[3] / "data" / "engines" / "h200"
GUARDS = parse_guards("ttft.p95=+10%,e2e.p50=+10%")  # what the gray-release benchmark guards
METRICS = ("ttft", "tpot", "e2e")
Z = NormalDist().inv_cdf(0.975)
POWER_Z = Z + NormalDist().inv_cdf(0.95)  # a change this many SEs away is found 95 % of the time


def _run() -> list[RequestRecord]:
    """The Poisson run in send order, each request's load at dispatch recorded as a gateway would."""
    lines = (DATA / "rate.records.jsonl").read_text().splitlines()
    records = sorted(
        (RequestRecord.from_dict(json.loads(x)) for x in lines if x.strip()), key=lambda r: r.sent_ns
    )
    sent = np.array([r.sent_ns for r in records])
    end = np.array([r.end_ns for r in records])
    for r in records:
        r.upstream_inflight = int(np.sum((sent < r.sent_ns) & (end > r.sent_ns)))
    return records


def _scaled(r: RequestRecord, factor: float) -> RequestRecord:
    """The request as if every moment after its send took ``factor`` times as long."""
    out = RequestRecord.from_dict(r.to_dict())
    out.upstream_inflight = r.upstream_inflight  # the engine's load is the same: only the build changed

    def at(t: int | None) -> int | None:
        return None if t is None else r.sent_ns + round((t - r.sent_ns) * factor)

    out.first_token_ns, out.first_answer_ns = at(r.first_token_ns), at(r.first_answer_ns)
    out.end_ns = at(r.end_ns)
    out.token_ns = [r.sent_ns + round((t - r.sent_ns) * factor) for t in r.token_ns]
    return out


def _arms(
    records: Sequence[RequestRecord], assign: Sequence[int], factor: float = 1.0
) -> dict[str, list[RequestRecord]]:
    """Pseudo-arms a (0) and b (1) on the one engine; b's latencies scaled by ``factor``."""
    out: dict[str, list[RequestRecord]] = {"a": [], "b": []}
    for r, k in zip(records, assign, strict=True):
        arm = "ab"[k]
        copy = _scaled(r, factor if arm == "b" else 1.0)
        copy.labels = {"arm": arm, "upstream": "h200"}
        out[arm].append(copy)
    return out


def _report(arms: dict[str, list[RequestRecord]]) -> tuple[ArmsReport, LoadMatch]:
    report = analyse_arms(arms, [], {"a": 1.0, "b": 1.0}, GUARDS, resamples=300, seed=0)
    return report, match_load("a", arms["a"], "b", arms["b"])


def _p50s(report: ArmsReport, match: LoadMatch) -> dict[str, tuple[float, float, float, JointSE]]:
    """Per metric: the median's change on the log scale, the SE the report used for it (from its
    interval), the independent SE at matched load, and the joint SE."""
    out = {}
    for metric in METRICS:
        row = report.diffs[0].latency.metric(metric).row("p50")
        mc = matched_change(match, metric, 50.0)
        joint = joint_ses(*match.samples(metric), list(match.common), [50.0]).get(50.0)
        assert row is not None and row.rel_ci is not None and row.rel is not None and mc is not None, metric
        assert joint is not None, metric  # the arms interleave in enough shared blocks
        lo, hi = row.rel_ci
        assert lo is not None and hi is not None, metric
        out[metric] = (math.log1p(row.rel), (math.log1p(hi) - math.log1p(lo)) / (2 * Z), mc.se_log, joint)
    return out


def test_alternate_requests_of_one_real_run_a_true_zero_is_covered_on_the_joint_path() -> None:
    records = _run()
    report, match = _report(_arms(records, [i % 2 for i in range(len(records))]))
    assert match.state == MATCHED
    assert "time blocks both arms share" in report.diffs[0].latency.method
    for metric, (log_rel, used, independent, joint) in _p50s(report, match).items():
        assert joint.blocks >= 20, metric
        assert used >= independent * math.sqrt(joint.tau) - 1e-9, metric  # never under the floor
        assert math.isclose(used, joint.floored(independent), rel_tol=1e-6), metric  # the joint path's SE
        assert abs(log_rel) <= Z * used, (metric, log_rel, used)
    assert report.verdict == HOLD and all(g.outcome != "breached" for g in report.guards)


def test_random_halves_of_one_real_run_the_interval_covers_zero_as_95_percent_should() -> None:
    """The randomisation distribution of a true zero: balanced random splits of the same run."""
    records = _run()
    covered, judged = 0, 0
    for seed in range(30):
        assign = np.random.default_rng(seed).permutation(len(records)) % 2
        arms = _arms(records, [int(k) for k in assign])
        match = match_load("a", arms["a"], "b", arms["b"])
        if match.state != MATCHED:  # 98 requests an arm over ~16 load bands: not every split matches
            continue
        for metric in METRICS:
            mc = matched_change(match, metric, 50.0)
            joint = joint_ses(*match.samples(metric), list(match.common), [50.0], seed).get(50.0)
            if mc is None or joint is None:
                continue
            judged += 1
            covered += abs(math.log1p(mc.rel)) <= Z * joint.floored(mc.se_log)
    assert judged >= 45 and covered >= 0.9 * judged, (judged, covered)


def test_one_arm_20_percent_slower_the_interval_covers_the_truth_and_decides_where_powered() -> None:
    records = _run()
    truth = math.log(1.2)
    report, match = _report(_arms(records, [i % 2 for i in range(len(records))], factor=1.2))
    assert match.state == MATCHED
    powered = []
    for metric, (log_rel, used, _, _) in _p50s(report, match).items():
        assert abs(log_rel - truth) <= Z * used, (metric, log_rel, used)
        row = report.diffs[0].latency.metric(metric).row("p50")
        assert row is not None and row.verdict is not Verdict.FASTER, metric
        if truth >= POWER_Z * used:  # the power to find +20 % is 95 % or more: it must be found
            powered.append(metric)
            assert row.rel_ci is not None and (row.rel_ci[0] or 0.0) > 0, metric
            assert row.verdict is Verdict.SLOWER, metric
    assert "e2e" in powered and "tpot" in powered, powered
    e2e = next(g for g in report.guards if g.guard.text.startswith("e2e"))
    assert e2e.outcome == "breached" and report.verdict == ROLL_BACK
