"""Absolute gates decided by intervals: fail only when the whole interval lies beyond the line, pass
only when it lies within, undecided when it straddles, the run is too short, or no interval forms."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from tokenpace.core.analysis.comparison.fail_on import parse_fail_on
from tokenpace.core.analysis.comparison.fail_on_judge import judge_fail_on
from tokenpace.core.exit_codes import ExitStatus, verdict_code
from tokenpace.core.stats import describe
from tokenpace.testing import dependent_series as ds


def _summary(ttft: dict[str, Any], sent: int = 500, errors: int = 0, **rest: Any) -> dict[str, Any]:
    return {
        "ttft_ms": ttft,
        "counts": {"sent": sent, "ok": sent - errors},
        "error_rate": errors / sent if sent else 0.0,
        "window_s": 50.0,
        "request_throughput": (sent - errors) / 50.0,
        "output_token_throughput": (sent - errors) * 100 / 50.0,
        "goodput": None,
        **rest,
    }


def _dist(
    n: int = 500, p95: float = 450.0, ci: tuple[float, float] = (440.0, 460.0), **rest: Any
) -> dict[str, Any]:
    return {"n": n, "mean": 400.0, "std": 30.0, "p95": p95, "ci95": {"p95": list(ci)}, "n_eff": {}, **rest}


def _judge(text: str, summary: dict[str, Any]) -> tuple[str, str]:
    report = judge_fail_on(parse_fail_on(text), summary)
    return report.outcome, report.line()


def test_the_interval_decides_not_the_point() -> None:
    s = _summary(_dist(p95=450.0, ci=(440.0, 460.0)))
    assert _judge("ttft.p95<470ms", s)[0] == "pass"
    assert _judge("ttft.p95<430ms", s)[0] == "fail"
    # the point (450) is under 455, but the interval reaches 460: not a pass
    outcome, line = _judge("ttft.p95<455ms", s)
    assert outcome == "undecided" and "straddles" in line and "would decide it" in line
    assert _judge("ttft.p95<=460ms", s)[0] == "pass" and _judge("ttft.p95<460ms", s)[0] == "undecided"


def test_the_dependence_aware_interval_is_the_one_used() -> None:
    """The summary's interval (at n_eff where requests moved together) decides, and too few
    effective samples beyond the percentile is undecided though the count alone would do."""
    wide = _summary(_dist(p95=450.0, ci=(430.0, 480.0), n_eff={"p95": 300.0}))
    assert _judge("ttft.p95<470ms", wide)[0] == "undecided"
    few = _summary(_dist(p95=450.0, ci=(445.0, 455.0), n_eff={"p95": 60.0}))
    outcome, line = _judge("ttft.p95<500ms", few)
    assert outcome == "undecided" and "worth 60 independent" in line and "about 834 requests" in line


def test_a_run_too_short_for_its_percentile_is_undecided_with_what_it_needs() -> None:
    s = _summary(_dist(n=120, p99=450.0, ci95={"p99": [440.0, 460.0]}))
    outcome, line = _judge("ttft.p99<10s", s)
    assert outcome == "undecided" and "too short for P99: 120 samples, it needs 500" in line
    # a thin sample never passes, but its interval's lower bound (a binomial rank) still fails it
    assert _judge("ttft.p99<100ms", s)[0] == "fail"
    thin = _summary(_dist(p95=450.0, ci=(445.0, 455.0), n_eff={"p95": 60.0}))
    assert _judge("ttft.p95<100ms", thin)[0] == "fail" and _judge("ttft.p95<500ms", thin)[0] == "undecided"


def test_an_asked_percentile_is_read_from_the_asked_table_and_a_missing_one_is_undecided() -> None:
    asked = {"metrics": {"ttft_ms": [{"name": "p99.9", "value": 900.0, "ci95": [850.0, 990.0]}]}}
    s = _summary(_dist(n=6000), percentiles=asked)
    assert _judge("ttft.p99.9<1s", s)[0] == "pass"
    outcome, line = _judge("ttft.p99.9<1s", _summary(_dist(n=6000)))
    assert outcome == "undecided" and "--percentiles 99.9" in line


def test_real_records_pass_fail_and_straddle() -> None:
    values = np.random.default_rng(1).normal(400, 30, 500)
    s = _summary(describe(values, ordered=True).to_dict())
    lo, hi = s["ttft_ms"]["ci95"]["p95"]
    assert _judge(f"ttft.p95<{hi + 1:.3f}ms", s)[0] == "pass"
    assert _judge(f"ttft.p95<{lo - 1:.3f}ms", s)[0] == "fail"
    assert _judge(f"ttft.p95<{(lo + hi) / 2:.3f}ms", s)[0] == "undecided"


def test_a_mean_gets_an_interval_from_its_spread() -> None:
    s = _summary(_dist(n=400))  # mean 400, sd 30: half-width 1.96 * 30 / 20 = 2.94
    assert _judge("ttft.mean<403ms", s)[0] == "pass"
    assert _judge("ttft.mean<397ms", s)[0] == "fail"
    assert _judge("ttft.mean<401ms", s)[0] == "undecided"


def test_the_error_rate_by_wilson_zero_errors_in_100_cannot_show_under_1_percent() -> None:
    outcome, line = _judge("error_rate<1%", _summary(_dist(), sent=100))
    assert outcome == "undecided" and "requests would decide it" in line
    assert _judge("error_rate<1%", _summary(_dist(), sent=1000))[0] == "pass"
    assert _judge("error_rate<1%", _summary(_dist(), sent=1000, errors=50))[0] == "fail"


def test_throughputs_are_lower_lines_on_a_count_interval() -> None:
    s = _summary(_dist())  # 500 ok in 50 s: 10 req/s, Poisson score interval about [9.2, 10.9]
    assert _judge("throughput>9", s)[0] == "pass"
    assert _judge("throughput>11/s", s)[0] == "fail"
    assert _judge("throughput>10", s)[0] == "undecided"
    assert _judge("output_throughput>900tok/s", s)[0] == "pass"
    outcome, line = _judge("goodput>1", s)
    assert outcome == "undecided" and "--slo" in line


def test_the_run_verdict_is_the_worst_line_and_names_it() -> None:
    s = _summary(_dist(), sent=1000)
    report = judge_fail_on(parse_fail_on("error_rate<1%,ttft.p95<455ms,ttft.p99<1s,ttft.mean<300ms"), s)
    assert report.outcome == "fail" and report.decided_by is not None
    assert report.decided_by.line.name == "ttft.mean" and report.line().startswith("FAIL: ttft.mean")
    doc = report.to_dict()
    assert doc["decided_by"] == "ttft.mean" and [x["outcome"] for x in doc["lines"]] == [
        "pass", "undecided", "undecided", "fail",
    ]  # fmt: skip
    undecided = judge_fail_on(parse_fail_on("error_rate<1%,ttft.p95<455ms"), s)
    assert undecided.outcome == "undecided" and undecided.to_dict()["decided_by"] == "ttft.p95"
    passed = judge_fail_on(parse_fail_on("error_rate<1%,ttft.p95<500ms"), s)
    assert passed.outcome == "pass" and passed.line().startswith("PASS: ttft.p95")  # the closest line


def test_a_side_the_run_cannot_bound_never_passes_but_its_lower_bound_still_fails() -> None:
    # 200 requests of AR(1) rho 0.9: worth about 10 at P95, whose upper side no value bounds
    x = ds.ar1(np.random.default_rng(31), 1, 200, 0.9)[0]
    s = _summary(describe(x, ordered=True).to_dict(), sent=200)
    lo, hi = s["ttft_ms"]["ci95"]["p95"]
    assert hi is None and lo is not None  # as JSON carries it (no Infinity token)
    far = judge_fail_on(parse_fail_on(f"ttft.p95<{100 * x.max():.0f}ms"), s)  # 100x every request
    assert far.outcome == "undecided" and verdict_code(far.outcome) is ExitStatus.UNDECIDED
    assert far.items[0].interval is not None and far.items[0].interval[1] == math.inf
    doc = json.dumps(far.to_dict(), allow_nan=False)  # valid JSON: the open side is null
    assert json.loads(doc)["lines"][0]["ci95"] == [lo, None]
    assert _judge(f"ttft.p95<{lo / 2:.3f}ms", s)[0] == "fail"  # the lower bound beyond the line decides
    # the same from a summary written by hand: a None side is unbounded
    hand = _summary(_dist(p95=450.0, ci95={"p95": [440.0, None]}))
    assert _judge("ttft.p95<1000s", hand)[0] == "undecided" and _judge("ttft.p95<400ms", hand)[0] == "fail"
