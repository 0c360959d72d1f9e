"""The bands' samples and the weighted percentile at the reference's load mix."""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.evidence.samples import metric_samples
from tokenpace.core.analysis.rollout.matched_strata import (
    NO_BAND,
    ArmSamples,
    SampleMemo,
    kish,
    matched_strata,
    percentile_se,
)
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def _record(
    name: str, ttft_ms: float, inflight: int | None = 0, gaps: int = 0, sent: int = 1
) -> RequestRecord:
    r = RequestRecord(name, sent_ns=sent * MS, upstream_inflight=inflight)
    r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft_ms * MS)
    r.token_ns = [r.first_token_ns + k * 3 * MS for k in range(gaps + 1)]
    r.output_tokens_counted, r.end_ns = gaps + 1, r.token_ns[-1]
    return r


def _arm(records: list[RequestRecord], metric: str = "ttft") -> ArmSamples:
    return ArmSamples.of(records, metric, lambda inflight: inflight)


def test_kish_is_one_over_the_sum_of_each_requests_squared_weight() -> None:
    strata = [np.ones(10), np.ones(40)]
    shares = [0.5, 0.5]
    weights = np.concatenate([np.full(10, 0.05), np.full(40, 0.5 / 40)])
    assert abs(kish(strata, shares) - 1 / float(np.sum(weights**2))) < 1e-9
    assert abs(kish(strata, [0.2, 0.8]) - 50) < 1e-9  # weights proportional to the counts: all count


def test_a_band_one_arm_lacks_is_left_out_and_the_rest_sorted() -> None:
    ref = [_record(f"r{i}", 30 - i) for i in range(3)] + [_record("r9", 50, inflight=1)]
    cand = [_record(f"c{i}", 10 + i) for i in range(2)]
    r, c, counts = matched_strata((_arm(ref), _arm(cand)), [0, 1])
    assert counts == [3.0] and len(r) == len(c) == 1
    assert list(r[0]) == [28.0, 29.0, 30.0] and list(c[0]) == [10.0, 11.0]


def _mixed_arm() -> list[RequestRecord]:
    """Requests over three bands and none, interleaved, with users, one failed, one warm-up."""
    out = []
    for i in range(30):
        r = _record(f"q{i}", 10 + (i * 7) % 13, inflight=[0, 1, 2, None][i % 4], gaps=i % 3, sent=100 - i)
        r.labels = {"user": f"u{i % 5}"} if i % 3 else {}
        out.append(r)
    out[3].status, out[4].warmup = Status.HTTP_ERROR, True
    return out


def test_an_arms_samples_in_bands_are_those_of_its_records_in_each_band() -> None:
    # what each band's records alone would give, band by band, their users and send times kept
    records = _mixed_arm()
    for metric in ("ttft", "itl", "tpot"):
        arm = _arm(records, metric)
        assert np.array_equal(arm.values, metric_samples(records, metric).values)
        found, band_of = arm.of_bands([2, 0])
        alone = [metric_samples([r for r in records if r.upstream_inflight == b], metric) for b in (2, 0)]
        assert [list(g) for g in found.groups] == [list(g) for s in alone for g in s.groups]
        assert list(band_of) == [j for j, s in enumerate(alone) for _ in s.groups]
        assert found.sent_ns is not None and list(found.sent_ns) == [
            t for s in alone if s.sent_ns is not None for t in s.sent_ns
        ]
        keys = [k for s in alone for k in (s.cluster or [""] * len(s.groups))]
        assert found.cluster == keys and any(keys)
        for b in (0, 1, 2):
            assert list(arm.in_band(b)) == sorted(
                metric_samples([r for r in records if r.upstream_inflight == b], metric).values
            )
    unloaded = _arm([_record("x", 5, inflight=None)])
    assert list(unloaded.bands) == [NO_BAND] and unloaded.of_bands([0])[0].groups == []
    assert _arm([_record("y", 5)]).of_bands([0])[0].cluster is None


def test_an_arms_samples_are_taken_once_a_metric() -> None:
    taken: list[int] = []

    def band_of(inflight: int) -> int:
        taken.append(inflight)
        return inflight

    memo = SampleMemo(_mixed_arm(), band_of)
    first = memo("ttft")
    assert memo("ttft") is first and memo("e2e") is not first
    assert len(taken) == 2 * sum(
        1 for r in _mixed_arm() if r.upstream_inflight is not None and not r.warmup and r.status is Status.OK
    )


def test_one_stratum_gives_the_plain_percentile_and_a_positive_se() -> None:
    values = np.sort(np.random.default_rng(0).lognormal(0, 0.3, 400))
    found = percentile_se([values], [1.0], 0.5)
    assert found is not None
    x, se, n_eff = found
    assert abs(x - float(np.median(values))) / x < 0.01 and se > 0 and abs(n_eff - 400) < 1e-6
    assert percentile_se([values[:50]], [1.0], 0.95) is None  # too few beyond P95
