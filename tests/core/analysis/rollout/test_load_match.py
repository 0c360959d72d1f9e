"""Arms compared at matched load: engines whose latency grows with the requests they carry, the
candidate on its own replica at a share of production's load. A candidate truly equal at 1/19 of
the load is never called faster (its latency guards undecided, the loads said); one truly 15 %
slower at equal load is rolled back, never promoted; equal arms at equal load are never breached;
a slower candidate hidden by a lighter load is caught once the loads are matched; an equal one that
carried more load on the same traffic is never rolled back."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.core.analysis.evidence.verdict import Verdict
from tokenpace.core.analysis.rollout.arms import HOLD, PROMOTE, ROLL_BACK, ArmsReport, analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.load_match import (
    MATCHED,
    UNCHECKED,
    UNMATCHED,
    band,
    band_range,
    match_load,
)
from tokenpace.core.record import RequestRecord

MS = 1_000_000
GUARDS = parse_guards("ttft.p50=+10%,ttft.p95=+10%,error_rate=+2pp")
DECIDED = {Verdict.FASTER, Verdict.SLOWER, Verdict.NEGLIGIBLE}


def arm_records(
    rng: np.random.Generator, arm: str, loads: np.ndarray, slower: float = 1.0, recorded: bool = True
) -> list[RequestRecord]:
    """Requests whose TTFT grows 8 % per request in flight on their upstream (queueing)."""
    out = []
    for i, load in enumerate(loads):
        ttft = 40 * (1 + 0.08 * load) * slower * rng.lognormal(0, 0.15)
        r = RequestRecord(f"{arm}{i}", labels={"arm": arm, "upstream": arm}, sent_ns=(i + 1) * 50 * MS)
        r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft * MS)
        r.token_ns = [r.first_token_ns + k * int(10 * slower * MS) for k in range(4)]
        r.output_tokens_counted, r.end_ns = 4, r.token_ns[-1]
        r.upstream_inflight = int(load) if recorded else None
        out.append(r)
    return out


def _judge(records: dict[str, list[RequestRecord]], seed: int = 0, **kw: object) -> ArmsReport:
    weights = {a: float(len(rs)) for a, rs in records.items()}
    return analyse_arms(records, [], weights, GUARDS, resamples=100, seed=seed, **kw)  # type: ignore[arg-type]


def _blind(records: dict[str, list[RequestRecord]]) -> dict[str, list[RequestRecord]]:
    """The same traffic as an older gateway stored it: no load at dispatch."""
    return {
        a: [RequestRecord.from_dict({**r.to_dict(), "upstream_inflight": None}) for r in rs]
        for a, rs in records.items()
    }


def _latency_guards(report: ArmsReport) -> list[str]:
    return [g.outcome for g in report.guards if g.guard.percentile is not None]


@pytest.mark.parametrize("seed", range(6))
def test_an_equal_candidate_at_a_nineteenth_of_the_load_is_never_called_faster(seed: int) -> None:
    rng = np.random.default_rng(seed)
    records = {
        "prod": arm_records(rng, "prod", rng.poisson(19, 3800)),
        "cand": arm_records(rng, "cand", rng.poisson(1, 200)),
    }
    report = _judge(records, seed)
    assert report.verdict == HOLD and _latency_guards(report) == ["undecided", "undecided"]
    assert all("different loads" in g.reason for g in report.guards if g.guard.percentile)
    rows = [row for m in report.diffs[0].latency.metrics for row in m.rows]
    assert not any(row.verdict in DECIDED for row in rows)  # the table calls nothing either
    load = report.to_dict()["diffs"][0]["load"]
    assert load["state"] == UNMATCHED
    assert load["reference"]["inflight_median"] >= 15 and load["candidate"]["inflight_median"] <= 2
    assert report.to_dict()["arms"][1]["load_at_dispatch"]["inflight_p90"] is not None
    # without the load the same traffic reads as a much faster candidate: what matching prevents
    unchecked = _judge(_blind(records), seed)
    assert unchecked.diffs[0].latency.metric("ttft").row("p50").verdict is Verdict.FASTER  # type: ignore[union-attr]
    assert any("could not be checked" in w for w in unchecked.warnings)


@pytest.mark.parametrize("seed", range(5))
def test_a_candidate_truly_15_percent_slower_at_equal_load_is_rolled_back(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    records = {
        "base": arm_records(rng, "base", rng.poisson(8, 1500)),
        "cand": arm_records(rng, "cand", rng.poisson(8, 1500), slower=1.15),
    }
    report = _judge(records, seed)
    assert report.diffs[0].load is not None and report.diffs[0].load.state == MATCHED
    assert report.verdict == ROLL_BACK and "breached" in _latency_guards(report)


def test_equal_arms_at_equal_load_are_never_breached() -> None:
    verdicts = []
    for seed in range(10):
        rng = np.random.default_rng(200 + seed)
        records = {
            "base": arm_records(rng, "base", rng.poisson(8, 1500)),
            "cand": arm_records(rng, "cand", rng.poisson(8, 1500)),
        }
        report = _judge(records, seed)
        assert "breached" not in _latency_guards(report), [g.reason for g in report.guards]
        verdicts.append(report.verdict)
    assert set(verdicts) <= {PROMOTE, HOLD} and verdicts.count(PROMOTE) >= 8


def test_a_slower_candidate_hidden_by_a_lighter_load_is_caught_at_matched_load() -> None:
    rng = np.random.default_rng(7)
    ref_loads, cand_loads = rng.integers(2, 11, 4000), rng.integers(1, 7, 2000)
    records = {
        "prod": arm_records(rng, "prod", ref_loads),
        "cand": arm_records(rng, "cand", cand_loads, slower=1.15),
    }
    assert _judge(_blind(records)).verdict == PROMOTE  # raw, the lighter load hides the slowdown
    report = _judge(records)
    match = report.diffs[0].load
    assert match is not None and match.state == MATCHED and match.coverage is not None
    assert match.coverage[0] < 0.7 < match.coverage[1]  # production's heavier loads left out
    assert report.verdict == ROLL_BACK
    row = report.diffs[0].latency.metric("ttft").row("p50")
    assert row is not None and row.rel is not None and 0.10 < row.rel < 0.20 and row.verdict is Verdict.SLOWER


def test_the_canary_is_judged_against_its_baseline_not_against_production() -> None:
    rng = np.random.default_rng(3)
    records = {
        "prod": arm_records(rng, "prod", rng.poisson(19, 3600)),
        "baseline": arm_records(rng, "baseline", rng.poisson(1, 1500)),
        "canary": arm_records(rng, "canary", rng.poisson(1, 1500)),
    }
    against_prod = _judge(records)
    assert against_prod.verdict == HOLD and len(against_prod.diffs) == 2  # both at another load
    kayenta = _judge(records, reference="baseline", candidate="canary")
    assert [d.arm for d in kayenta.diffs] == ["canary"] and kayenta.verdict == PROMOTE
    assert kayenta.to_dict()["candidate"] == "canary"
    assert any("prod shown, not judged" in w for w in kayenta.warnings)
    with pytest.raises(ValueError, match="no arm 'canry'"):
        _judge(records, reference="baseline", candidate="canry")
    with pytest.raises(ValueError, match="judged against"):
        _judge(records, reference="baseline", candidate="baseline")


def test_records_without_the_load_leave_it_unchecked() -> None:
    rng = np.random.default_rng(5)
    records = {
        "a": arm_records(rng, "a", rng.poisson(4, 300)),
        "b": arm_records(rng, "b", rng.poisson(4, 300), recorded=False),
    }
    match = match_load("a", records["a"], "b", records["b"])
    assert match.state == UNCHECKED and "on b" in match.reason
    report = _judge(records)
    assert any("b: the load at dispatch was not recorded" in w for w in report.to_dict()["warnings"])


def test_load_bands_are_exact_when_few_run_and_a_quarter_wide_beyond() -> None:
    assert [band(n) for n in range(5)] == [0, 1, 2, 3, 4]
    for n in range(200):
        lo, hi = band_range(band(n))
        assert lo <= n <= hi and (n < 5 or hi <= 1.25 * lo + 1)
    assert band(1) != band(19) and band_range(band(19)) == (16, 19)


def test_a_candidate_whose_own_slowness_raised_its_load_is_still_rolled_back() -> None:
    """Equal traffic per upstream, but the slower canary holds its requests longer, so more are
    in flight on it (Little's law): its loads are not the baseline's, yet only a breach decides."""
    rng = np.random.default_rng(9)
    records = {
        "base": arm_records(rng, "base", rng.poisson(3, 1500)),
        "canary": arm_records(rng, "canary", rng.poisson(12, 1500), slower=1.5),
    }
    report = _judge(records)
    match = report.diffs[0].load
    assert match is not None and match.state == UNMATCHED and match.only_worse
    # decided in the load bands both hold: the P50 there, the P95 too few of the canary's requests
    assert report.verdict == ROLL_BACK and _latency_guards(report)[0] == "breached"
    assert all("its own slowness may have raised" in g.reason for g in report.guards if g.guard.percentile)
    assert "at the loads both held" in report.guards[0].reason
    # the same loads on a canary given twice the traffic: its load may be the traffic's doing
    more = {**records, "canary": records["canary"] + arm_records(rng, "canary", rng.poisson(12, 1500))}
    held = _judge(more)
    assert held.diffs[0].load is not None and not held.diffs[0].load.only_worse
    assert held.verdict == HOLD and _latency_guards(held) == ["undecided", "undecided"]


def steep_records(rng: np.random.Generator, arm: str, loads: np.ndarray) -> list[RequestRecord]:
    """An engine whose TTFT grows 20 % per request in flight (steeply loaded); the same build."""
    out = arm_records(rng, arm, loads)
    for r, load in zip(out, loads, strict=True):
        ttft = 40 * (1 + 0.20 * load) * rng.lognormal(0, 0.15)
        assert r.sent_ns is not None and r.first_token_ns is not None
        shift = r.sent_ns + int(ttft * MS) - r.first_token_ns
        r.first_token_ns = r.first_answer_ns = r.first_token_ns + shift
        r.token_ns = [t + shift for t in r.token_ns]
        r.end_ns = r.token_ns[-1]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_an_equal_candidate_carrying_more_load_on_the_same_traffic_is_never_rolled_back(seed: int) -> None:
    """The same build, the same number of requests, but the canary's arrivals bunched (four times
    the load in flight): its raw TTFT is about twice the baseline's, all of it the load's."""
    rng = np.random.default_rng(300 + seed)
    records = {
        "base": steep_records(rng, "base", rng.poisson(3, 1500)),
        "canary": steep_records(rng, "canary", rng.poisson(12, 1500)),
    }
    raw = _judge(_blind(records), seed)
    assert raw.verdict == ROLL_BACK  # what the load does to an equal build judged raw
    report = _judge(records, seed)
    match = report.diffs[0].load
    assert match is not None and match.state == UNMATCHED and match.only_worse and match.common
    assert report.verdict == HOLD and _latency_guards(report) == ["undecided", "undecided"]
    row = report.diffs[0].latency.metric("ttft").row("p50")
    assert row is not None and row.verdict is Verdict.UNDECIDED  # the table calls it no slower either
    # loads with no band in common: nothing measured like with like, still no roll back
    apart = {"base": records["base"], "canary": steep_records(rng, "canary", rng.poisson(40, 1500))}
    far = _judge(apart, seed)
    assert far.diffs[0].load is not None and not far.diffs[0].load.common
    assert far.verdict == HOLD and _latency_guards(far) == ["undecided", "undecided"]
