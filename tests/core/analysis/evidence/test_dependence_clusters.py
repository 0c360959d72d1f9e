"""Resampling whole users or sessions: where requests carry a user (or session) whose requests move
together, the plan resamples users when their design effect beats the time blocks', and the
intervals then cover a known per-user truth that the bootstrap over requests misses."""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.evidence.bootstrap import resample_percentiles
from tokenpace.core.analysis.evidence.clusters import cluster_design_effect
from tokenpace.core.analysis.evidence.dependence import dependence
from tokenpace.core.analysis.evidence.samples import Samples, cluster_key, metric_samples
from tokenpace.core.record import RequestRecord, Status
from tokenpace.testing import dependent_series as ds

QS = [50.0, 95.0]


def _keyed(x: np.ndarray, who: np.ndarray, kind: str = "user") -> Samples:
    return Samples([np.array([v]) for v in x], None, [f"{kind}:{u}" for u in who])


def _covers(samples: Samples, truth: list[float], rng: np.random.Generator) -> np.ndarray:
    sd = resample_percentiles(samples, QS, 200, rng).std(axis=0, ddof=1)
    point = np.percentile(samples.values, QS)
    return np.abs(point - np.array(truth)) <= 1.96 * sd


def test_a_per_user_effect_is_covered_only_when_users_are_resampled() -> None:
    rng = np.random.default_rng(21)
    series, who = ds.per_user(rng, 120, 600, users=20)
    truth = [ds.per_user_truth(q) for q in QS]
    keyed, plain = np.zeros(len(QS)), np.zeros(len(QS))
    for x, w in zip(series, who, strict=True):
        s = _keyed(x, w)
        plan = dependence(s, QS)
        assert plan.by == "user" and np.all(plan.n_eff < 600 / 4)
        keyed += _covers(s, truth, rng)
        plain += _covers(Samples(s.groups), truth, rng)
    assert np.all(keyed / len(series) >= 0.93), keyed
    assert np.all(plain / len(series) < 0.6), plain  # one by one: far too narrow


def test_users_without_an_effect_keep_the_plain_or_time_resampling() -> None:
    rng = np.random.default_rng(22)
    plain_kept = 0
    for x in 100 * rng.lognormal(0, 0.5, (40, 1000)):
        plan = dependence(_keyed(x, rng.integers(0, 20, 1000)), QS)
        plain_kept += plan.by == "requests" and bool(np.all(plan.n_eff == 1000))
    assert plain_kept >= 36
    # requests that move together in time, users drawn at random: time blocks win
    x = ds.ar1(rng, 1, 2000, 0.9)[0]
    plan = dependence(_keyed(x, rng.integers(0, 20, 2000)), QS)
    assert plan.by == "time blocks" and plan.block > 5


def test_the_cluster_design_effect_sees_the_users_that_hold_the_variance() -> None:
    rng = np.random.default_rng(23)
    x, who = ds.per_user(rng, 1, 2000, spread=0.8)
    below = (x[0] <= np.median(x[0])).astype(float)
    assert cluster_design_effect(below, who[0]) > 20
    assert cluster_design_effect(below, rng.integers(0, 20, 2000)) == 1.0  # keys unrelated to values
    assert cluster_design_effect(np.ones(100), np.arange(100) % 12) == 1.0  # constant: nothing to say
    assert cluster_design_effect(below[:100], np.arange(100) % 5) == 1.0  # 5 clusters, values unrelated


def _record(
    i: int, ms: float, labels: dict[str, str] | None = None, session: int | None = None
) -> RequestRecord:
    r = RequestRecord(request_id=str(i), sent_ns=i * 10_000_000, labels=labels or {}, session=session)
    r.status = Status.OK
    r.first_token_ns = r.sent_ns + int(ms * 1e6)
    r.token_ns = [r.first_token_ns + k * 5_000_000 for k in range(4)]
    r.end_ns = r.token_ns[-1]
    r.output_tokens_counted = 4
    return r


def test_records_carry_their_user_or_session_into_the_samples() -> None:
    assert cluster_key(_record(0, 1, {"user": "ab12"})) == "user:ab12"
    assert cluster_key(_record(0, 1, {"user": "ab12"}, session=3)) == "user:ab12"  # the gateway's user first
    assert cluster_key(_record(0, 1, session=3)) == "session:3"
    assert cluster_key(_record(0, 1, {"session": "s9"})) == "session:s9"
    assert cluster_key(_record(0, 1, {"gateway_session": "g"})) == ""  # the gateway's own run, no user's
    recs = [_record(i, 50.0, session=i % 3) for i in range(6)] + [_record(9, 50.0)]
    for metric in ("ttft", "itl"):
        s = metric_samples(recs, metric)
        assert s.cluster == [f"session:{i % 3}" for i in range(6)] + [""]
        kind, codes = s.clusters_in_send_order() or ("", np.empty(0))
        assert kind == "session" and codes.tolist() == [0, 1, 2, 0, 1, 2, 3]  # unkeyed: its own
    assert metric_samples([_record(0, 1.0)], "ttft").cluster is None
