"""The bands' samples and the weighted percentile at the reference's load mix."""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.rollout.matched_strata import kish, matched_strata, percentile_se
from tokenpace.core.record import RequestRecord

MS = 1_000_000


def _record(name: str, ttft_ms: float) -> RequestRecord:
    r = RequestRecord(name, sent_ns=MS)
    r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft_ms * MS)
    r.token_ns = [r.first_token_ns]
    r.output_tokens_counted, r.end_ns = 1, r.first_token_ns
    return r


def test_kish_is_one_over_the_sum_of_each_requests_squared_weight() -> None:
    strata = [np.ones(10), np.ones(40)]
    shares = [0.5, 0.5]
    weights = np.concatenate([np.full(10, 0.05), np.full(40, 0.5 / 40)])
    assert abs(kish(strata, shares) - 1 / float(np.sum(weights**2))) < 1e-9
    assert abs(kish(strata, [0.2, 0.8]) - 50) < 1e-9  # weights proportional to the counts: all count


def test_a_band_one_arm_lacks_is_left_out_and_the_rest_sorted() -> None:
    ref = {0: [_record(f"r{i}", 30 - i) for i in range(3)], 1: [_record("r9", 50)]}
    cand = {0: [_record(f"c{i}", 10 + i) for i in range(2)], 1: []}
    r, c, counts = matched_strata((ref, cand), [0, 1], "ttft")
    assert counts == [3.0] and len(r) == len(c) == 1
    assert list(r[0]) == sorted(r[0]) and len(c[0]) == 2


def test_one_stratum_gives_the_plain_percentile_and_a_positive_se() -> None:
    values = np.sort(np.random.default_rng(0).lognormal(0, 0.3, 400))
    found = percentile_se([values], [1.0], 0.5)
    assert found is not None
    x, se, n_eff = found
    assert abs(x - float(np.median(values))) / x < 0.01 and se > 0 and abs(n_eff - 400) < 1e-6
    assert percentile_se([values[:50]], [1.0], 0.95) is None  # too few beyond P95
