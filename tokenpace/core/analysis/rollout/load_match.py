"""Arms compared at the same load. Pure.

An engine's latency grows with the requests it carries, so two arms whose upstreams ran at
different loads differ by the load as much as by the build (a candidate on its own replica at 5 %
of the traffic carries about 1/19 of production's). Each gateway record says how many requests
were in flight on its upstream when it was sent (``upstream_inflight``); here the arms are
compared within load bands both of them hold:

- Bands: each in-flight count below ``EXACT_BELOW`` is a band of its own, above it bands are
  ``BAND_RATIO`` wide. A band is *common* when each arm has ``MIN_BAND_N`` measured requests in it.
- The candidate's requests are reweighted so that its share in each common band is the
  reference's (direct standardisation: the candidate's percentile at the reference's load mix);
  the reference keeps its own requests in those bands. Both percentiles are of the weighted sample.
- Their standard errors are Woodruff's: the interval of the weighted CDF at the percentile
  (stratified, sum of W_b^2 p_b (1 - p_b) / n_b over the bands) mapped back through the quantile
  function. The guard never uses a narrower SE than the unmatched comparison's (which counts
  requests that move together) -- except where the arms interleave in enough shared time blocks:
  those resampled jointly, a wave that slowed both arms cancels (``joint_blocks``).
- Where matching cannot fix the difference -- the common bands hold less than ``MIN_COVERAGE`` of
  either arm's requests, or the arms' mean loads within them still differ by more than
  ``MAX_RESIDUAL`` -- the comparison is *unmatched*: no latency verdict, the reason and the loads
  said. Records without the field (an older gateway) leave the load *unchecked*.
- Unmatched, an arm given no more traffic than the reference that still carried more in flight may
  have raised its load by answering slower; but an equal build whose arrivals bunched up carries
  more too, and on a steeply loaded engine its raw latency rises with that load alone. So only a
  breach decides then, and only one measured in the load bands both arms hold (any coverage):
  like with like, never the raw comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from tokenpace.core.analysis.comparison.compare import Comparison
from tokenpace.core.analysis.evidence.runchange import is_open
from tokenpace.core.analysis.evidence.samples import measured_ok
from tokenpace.core.analysis.evidence.verdict import Verdict, decide_interval
from tokenpace.core.analysis.rollout.guards import Evidence, Guard, GuardItem, judge
from tokenpace.core.analysis.rollout.joint_blocks import joint_ses
from tokenpace.core.analysis.rollout.matched_strata import (
    ArmSamples,
    SampleMemo,
    Strata,
    matched_strata,
    percentile_se,
)
from tokenpace.core.record import RequestRecord

EXACT_BELOW = 5  # in-flight counts 0..4: a band each (one request more matters most when few run)
BAND_RATIO = 1.25  # above: bands 25 % wide (5-6, 7, 8-9, 10-12, 13-15, ...)
MIN_BAND_N = 20  # measured requests of each arm in a band before it is common
MIN_COVERAGE = 0.5  # share of each arm's measured requests the common bands must hold
MAX_RESIDUAL = 0.10  # the matched mean loads may still differ by this much (relative)
MATCHED, UNMATCHED, UNCHECKED = "matched", "unmatched", "unchecked"
_Z95 = NormalDist().inv_cdf(0.975)


def band(inflight: int) -> int:
    """The load band of an in-flight count."""
    if inflight < EXACT_BELOW:
        return max(inflight, 0)
    return EXACT_BELOW + math.floor(math.log(inflight / EXACT_BELOW) / math.log(BAND_RATIO) + 1e-9)


def band_range(b: int) -> tuple[int, int]:
    """The in-flight counts a band holds (inclusive)."""
    if b < EXACT_BELOW:
        return b, b
    k = b - EXACT_BELOW
    lo = math.ceil(EXACT_BELOW * BAND_RATIO**k - 1e-9)
    hi = math.ceil(EXACT_BELOW * BAND_RATIO ** (k + 1) - 1e-9) - 1
    return lo, max(hi, lo)


def _median_p90(values: Sequence[int]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.percentile(values, 50)), float(np.percentile(values, 90))


@dataclass(frozen=True, slots=True)
class ArmLoad:
    """An arm's load at dispatch: requests in flight on its upstream when each was sent."""

    requests: int  # measured requests with the load recorded
    missing: int  # measured requests without it (an older gateway)
    median: float | None
    p90: float | None
    by_upstream: dict[str, tuple[int, float | None, float | None]] = field(default_factory=dict)
    mean: float | None = None
    per_upstream: float = 0.0  # requests sent to each of its upstreams (the traffic it was given)

    @property
    def text(self) -> str:
        if self.median is None:
            return "not recorded"
        return f"median {self.median:g}, p90 {self.p90:g} in flight"

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "without_load": self.missing,
            "inflight_median": self.median,
            "inflight_p90": self.p90,
            "inflight_mean": self.mean,
            "requests_per_upstream": self.per_upstream,
            "by_upstream": {
                u: {"requests": n, "inflight_median": m, "inflight_p90": p}
                for u, (n, m, p) in self.by_upstream.items()
            },
        }


def arm_load(records: Sequence[RequestRecord]) -> ArmLoad:
    """The load of an arm's measured requests, overall and per upstream (replica): bounded by the
    arm's upstreams."""
    sent = [r for r in records if not r.warmup]
    loads = [r.upstream_inflight for r in sent if r.upstream_inflight is not None]
    per: dict[str, list[int]] = {}
    for r in sent:
        if r.upstream_inflight is not None:
            per.setdefault(r.labels.get("upstream", ""), []).append(r.upstream_inflight)
    median, p90 = _median_p90(loads)
    by = {u: (len(v), *_median_p90(v)) for u, v in per.items()} if len(per) > 1 else {}
    mean = sum(loads) / len(loads) if loads else None
    per_upstream = len(sent) / max(len({r.labels.get("upstream", "") for r in sent}), 1)
    return ArmLoad(len(loads), len(sent) - len(loads), median, p90, by, mean, per_upstream)


@dataclass(slots=True)
class LoadMatch:
    """How the candidate's load compares with the reference's, and the bands both hold."""

    state: str  # matched, unmatched, unchecked
    reason: str
    reference: ArmLoad
    candidate: ArmLoad
    common: dict[int, tuple[int, int]] = field(default_factory=dict)  # band -> (n ref, n cand)
    coverage: tuple[float, float] | None = None  # share of each arm's requests in the common bands
    mean_load: tuple[float, float] | None = None  # each arm's mean in flight at the reference's mix
    only_worse: bool = False  # unmatched, its load maybe its own doing: a breach in common bands decides
    by_band: tuple[dict[int, list[RequestRecord]], dict[int, list[RequestRecord]]] = ({}, {})
    memos: tuple[SampleMemo, SampleMemo] | None = None  # each arm's samples by metric, taken once

    def samples(self, metric: str) -> tuple[ArmSamples, ArmSamples]:
        """Both arms' samples of ``metric`` with their load bands."""
        assert self.memos is not None  # match_load sets them
        return self.memos[0](metric), self.memos[1](metric)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason,
            "reference": self.reference.to_dict(),
            "candidate": self.candidate.to_dict(),
            "common_bands": [
                {"inflight": list(band_range(b)), "requests_reference": r, "requests_candidate": c}
                for b, (r, c) in sorted(self.common.items())
            ],
            "coverage": list(self.coverage) if self.coverage else None,
            "only_a_breach_decides": self.only_worse,
            "matched_mean_inflight": list(self.mean_load) if self.mean_load else None,
        }


def _by_band(records: Sequence[RequestRecord]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = {}
    for r in measured_ok(records):
        if r.upstream_inflight is not None:
            out.setdefault(band(r.upstream_inflight), []).append(r)
    return out


def sample_memo(records: Sequence[RequestRecord]) -> SampleMemo:
    """An arm's samples by metric, with each request's load band, each taken once."""
    return SampleMemo(records, band)


def _mean(records: Sequence[RequestRecord]) -> float:
    return sum(r.upstream_inflight or 0 for r in records) / len(records)


def match_load(
    ref_arm: str,
    ref: Sequence[RequestRecord],
    cand_arm: str,
    cand: Sequence[RequestRecord],
    memos: tuple[SampleMemo, SampleMemo] | None = None,
    loads: tuple[ArmLoad, ArmLoad] | None = None,
) -> LoadMatch:
    """``memos``: the arms' samples (``sample_memo`` of ``ref`` and ``cand``) where the caller
    took some already; ``loads``: their ``arm_load``, likewise."""
    memos = memos or (sample_memo(ref), sample_memo(cand))
    ref_load, cand_load = loads or (arm_load(ref), arm_load(cand))
    names = f"{ref_arm} {ref_load.text}, {cand_arm} {cand_load.text}"
    if not ref_load.requests or not cand_load.requests:
        lacking = " and ".join(a for a, ld in ((ref_arm, ref_load), (cand_arm, cand_load)) if not ld.requests)
        return LoadMatch(
            UNCHECKED,
            f"the load at dispatch was not recorded on {lacking} (a gateway older than the field): "
            "the arms' loads could not be checked, latency is compared as if they were equal",
            ref_load,
            cand_load,
            memos=memos,
        )
    by_ref, by_cand = _by_band(ref), _by_band(cand)
    n_ref, n_cand = sum(map(len, by_ref.values())), sum(map(len, by_cand.values()))
    common = {
        b: (len(by_ref[b]), len(by_cand[b]))
        for b in sorted(by_ref)
        if len(by_ref[b]) >= MIN_BAND_N and len(by_cand.get(b, ())) >= MIN_BAND_N
    }
    cov_ref = sum(r for r, _ in common.values()) / n_ref if n_ref else 0.0
    cov_cand = sum(c for _, c in common.values()) / n_cand if n_cand else 0.0
    match = LoadMatch(
        MATCHED, "", ref_load, cand_load, common, (cov_ref, cov_cand), by_band=(by_ref, by_cand), memos=memos
    )
    if min(cov_ref, cov_cand) < MIN_COVERAGE:
        match.state = UNMATCHED
        match.reason = (
            f"the arms ran at different loads ({names} at dispatch): the load bands both hold with "
            f"{MIN_BAND_N}+ requests each cover {cov_ref:.0%} of {ref_arm}'s and {cov_cand:.0%} of "
            f"{cand_arm}'s requests (under {MIN_COVERAGE:.0%}): latency cannot be compared like with like"
        )
        return _own_doing(match, cand_arm)
    total = sum(r for r, _ in common.values())
    mean_ref = sum(_mean(by_ref[b]) * r / total for b, (r, _) in common.items())
    mean_cand = sum(_mean(by_cand[b]) * r / total for b, (r, _) in common.items())
    match.mean_load = (mean_ref, mean_cand)
    if abs(mean_cand - mean_ref) > MAX_RESIDUAL * max(mean_ref, mean_cand, 1.0):
        match.state = UNMATCHED
        match.reason = (
            f"the arms ran at different loads ({names} at dispatch): even within the common load "
            f"bands their mean in flight differs ({mean_ref:.2f} against {mean_cand:.2f}, over "
            f"{MAX_RESIDUAL:.0%}): latency cannot be compared like with like"
        )
        return _own_doing(match, cand_arm)
    match.reason = (
        f"compared at matched load ({names} at dispatch): {len(common)} common load band(s) "
        f"holding {cov_ref:.0%} of {ref_arm}'s and {cov_cand:.0%} of {cand_arm}'s requests, "
        f"{cand_arm} weighted to {ref_arm}'s mix"
    )
    return match


def _own_doing(match: LoadMatch, cand_arm: str) -> LoadMatch:
    """An arm given no more traffic per upstream than the reference (within chance: two SDs of
    a difference of Poisson counts) that still carried more in flight may have done so by
    answering slower (Little's law), or by chance (its arrivals bunched): a breach measured in
    the load bands both arms hold decides, nothing else (its raw latency carries the load)."""
    ref, cand = match.reference, match.candidate
    if ref.mean is None or cand.mean is None or cand.mean <= ref.mean:
        return match
    if cand.per_upstream > ref.per_upstream + 2 * math.sqrt(ref.per_upstream + cand.per_upstream):
        return match
    match.only_worse = True
    match.reason += (
        f"; but {cand_arm} carried more in flight on no more traffic per upstream "
        f"({cand.per_upstream:,.0f} requests against {ref.per_upstream:,.0f}): its own slowness "
        "may have raised its load, so only a breach at the loads both held decides"
    )
    return match


@dataclass(frozen=True, slots=True)
class MatchedChange:
    """A percentile of each arm at the reference's load mix, the change B/A - 1 and its SE."""

    a: float
    b: float
    rel: float
    se_log: float  # of log(B/A): Woodruff's, both arms
    n: int  # the smaller arm's effective requests (the candidate's after weighting: Kish)


def matched_change(
    match: LoadMatch, metric: str, q: float, strata: Strata | None = None
) -> MatchedChange | None:
    """The candidate's change in the ``q`` (0-100) percentile of ``metric`` at the reference's
    load mix over the common bands; None unless matched (or unmatched where only a breach
    decides: ``only_worse``) with enough samples on both arms; ``strata``: ``matched_strata``'s
    (computed once a metric by the caller, or here)."""
    if match.state != MATCHED and not (match.state == UNMATCHED and match.only_worse):
        return None
    if strata is None:
        strata = matched_strata(match.samples(metric), match.common)
    ref_strata, cand_strata, shares = strata
    if not shares:
        return None
    shares = [s / sum(shares) for s in shares]
    ref = percentile_se(ref_strata, shares, q / 100)
    cand = percentile_se(cand_strata, shares, q / 100)
    if ref is None or cand is None:
        return None
    rel = cand[0] / ref[0] - 1
    return MatchedChange(ref[0], cand[0], rel, math.hypot(ref[1], cand[1]), int(min(ref[2], cand[2])))


def at_matched_load(
    latency: Comparison, match: LoadMatch, seed: int = 0
) -> dict[str, tuple[MatchedChange, float]]:
    """The latency table judged at matched load, in place: matched, each percentile's row holds
    both arms at the reference's load mix (its interval never narrower than the unmatched one's);
    unmatched, no row is called better or negligible (their p-values measured the load), and
    worse only where its load may be its own doing and the bands both arms hold show it worse.
    Returns, per ``metric.pNN``, the matched change (in the common bands) and the SE the guards use."""
    out: dict[str, tuple[MatchedChange, float]] = {}
    z = NormalDist().inv_cdf(1 - latency.alpha / 2)
    joined, common = 0, list(match.common) if match.state == MATCHED else []  # joint SEs: matched only
    for m in latency.metrics:
        qs = [float(row.percentile[1:]) for row in m.rows if row.verdict is not Verdict.TOO_FEW]
        arms = match.samples(m.metric) if match.state != UNCHECKED else None
        joints = joint_ses(*arms, common, qs, seed) if arms is not None else {}
        strata = matched_strata(arms, match.common) if arms is not None else None
        for row in m.rows:
            if match.state == UNMATCHED:  # its p-value and power measured the load
                row.p_value, row.detectable, row.runs_needed = None, None, None
            if match.state == UNCHECKED or row.verdict is Verdict.TOO_FEW:
                continue
            mc = matched_change(match, m.metric, float(row.percentile[1:]), strata)
            se = max(mc.se_log if mc else 0.0, row.change.se_log if row.change is not None else 0.0)
            joint = joints.get(float(row.percentile[1:])) if mc is not None else None
            if mc is not None and joint is not None:  # joint_blocks
                se, joined = joint.floored(mc.se_log), joined + 1
            if match.state == UNMATCHED:
                row.verdict = _worse_in_common_bands(mc, se, z, m.higher_is_better, latency.min_effect)
                if mc is not None:
                    out[f"{m.metric}.{row.percentile}"] = (mc, se)
                continue
            if mc is None:
                row.verdict = Verdict.TOO_FEW
                continue
            log_r = math.log1p(mc.rel)
            lo, hi = math.expm1(log_r - z * se), math.expm1(log_r + z * se)
            # A side an arm's n_eff cannot bound stays open, unless shared blocks measured the
            # change itself: the waves both arms ride cancel in it.
            if joint is None and row.change is not None and is_open(row.change):
                lo = -1.0 if row.change.rel_lo is not None and row.change.rel_lo <= -1 else lo
                hi = math.inf if row.change.rel_hi is not None and math.isinf(row.change.rel_hi) else hi
            row.a, row.b, row.diff, row.rel = mc.a, mc.b, mc.b - mc.a, mc.rel
            row.ci, row.rel_ci = (mc.a * lo, mc.a * hi), (lo, hi)
            row.p_value = 2 * (1 - NormalDist().cdf(abs(log_r) / se)) if se > 0 else None
            row.detectable, row.runs_needed = None, None
            row.verdict = decide_interval(lo, hi, True, m.higher_is_better, latency.min_effect)
            out[f"{m.metric}.{row.percentile}"] = (mc, se)
        median = m.row("p50")
        if median is not None and match.state != UNCHECKED:
            m.verdict = median.verdict
        if match.state == UNMATCHED:
            m.rank_p = m.prob_b_greater = None
    if match.state == MATCHED:
        latency.method = "percentiles at matched load (the candidate weighted to the reference's load mix)"
        if joined:
            latency.method += "; changes' SEs from time blocks both arms share, resampled jointly"
    return out


def _worse_in_common_bands(
    mc: MatchedChange | None, se: float, z: float, higher_is_better: bool, min_effect: float
) -> Verdict:
    """An unmatched row: worse only where the load bands both arms hold show it, else undecided."""
    if mc is None:
        return Verdict.UNDECIDED
    log_r = math.log1p(mc.rel)
    lo, hi = math.expm1(log_r - z * se), math.expm1(log_r + z * se)
    verdict = decide_interval(lo, hi, True, higher_is_better, min_effect)
    worse = Verdict.FASTER if higher_is_better else Verdict.SLOWER
    return verdict if verdict is worse else Verdict.UNDECIDED


def unmatched_item(
    guard: Guard,
    arm: str,
    load: LoadMatch,
    shared: tuple[MatchedChange, float] | None,
    per_s: float | None,
    alpha: float,
) -> GuardItem:
    """A latency guard of arms at other loads: undecided -- unless the candidate's load may be
    its own doing and the load bands both arms hold (``shared``: the change there and its SE)
    show a breach (never a pass: the raw latency carries the load)."""
    if load.only_worse and shared is not None:
        mc, se = shared
        item = judge(guard, arm, Evidence(mc.rel, se, mc.n, "requests at the loads both held", per_s), alpha)
        if item.outcome == "breached":
            return GuardItem(guard, arm, item.change, item.ci, "breached", f"{item.reason}; {load.reason}")
    return GuardItem(guard, arm, None, None, "undecided", load.reason)
