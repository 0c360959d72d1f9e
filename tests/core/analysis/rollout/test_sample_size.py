"""A latency guard whose percentile has too few effective requests at matched load says what would
decide it: the effective requests an arm has and needs, the requests an arm that means at the
window's effective fraction, and the time at its traffic; in the JSON as fields, not only text."""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.rollout.arms import analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.analysis.rollout.load_match import MATCHED, match_load, matched_change
from tokenpace.core.analysis.rollout.sample_size import matched_effective
from tokenpace.core.record import RequestRecord

MS = 1_000_000


def arm_records(rng: np.random.Generator, arm: str, loads: list[int]) -> list[RequestRecord]:
    """One request every 50 ms, TTFT growing with the requests in flight at dispatch."""
    out = []
    for i, load in enumerate(loads):
        r = RequestRecord(f"{arm}{i}", labels={"arm": arm, "upstream": arm}, sent_ns=(i + 1) * 50 * MS)
        r.first_token_ns = r.first_answer_ns = r.sent_ns + int(
            40 * (1 + 0.08 * load) * rng.lognormal(0, 0.15) * MS
        )
        r.token_ns = [r.first_token_ns + k * 10 * MS for k in range(4)]
        r.output_tokens_counted, r.end_ns = 4, r.token_ns[-1]
        r.upstream_inflight = load
        out.append(r)
    return out


def _arms(per_band_ref: tuple[int, ...], per_band_cand: tuple[int, ...]) -> dict[str, list[RequestRecord]]:
    rng = np.random.default_rng(1)
    ref = [load for load, n in enumerate(per_band_ref) for _ in range(n)]
    cand = [load for load, n in enumerate(per_band_cand) for _ in range(n)]
    return {"prod": arm_records(rng, "prod", ref), "cand": arm_records(rng, "cand", cand)}


def test_a_p95_at_matched_load_with_too_few_effective_requests_carries_a_count() -> None:
    # 101 requests an arm, the candidate's mostly at 2 in flight, the reference's mostly at 0:
    # weighted to the reference's mix the candidate holds about 49 effective requests, under the
    # 100 a P95 needs (5 beyond it).
    records = _arms((60, 20, 21), (20, 20, 61))
    report = analyse_arms(
        records, [], {"prod": 1.0, "cand": 1.0}, parse_guards("ttft.p95=+10%"), resamples=100
    )
    assert report.diffs[0].load is not None and report.diffs[0].load.state == MATCHED
    item = report.guards[0]
    assert item.outcome == "undecided" and item.effective is not None
    now, need = item.effective
    assert 40 <= now <= 60 and need == 100
    per_arm = item.needed
    assert per_arm is not None and per_arm >= 101 * need / (now + 1)  # the arm's 101 at its fraction
    assert (
        f"P95 needs about 100 effective requests an arm at matched load ({now} now, from 101 requests)"
        in (item.reason)
    )
    assert (
        f"about {per_arm} requests an arm, about" in item.reason and "s more at this traffic" in item.reason
    )
    js = report.to_dict()["guards"][0]
    assert js["effective_per_arm"] == {"now": now, "needed": 100} and js["needed_per_arm"] == per_arm


def test_the_effective_count_is_the_one_the_matched_change_rests_on() -> None:
    records = _arms((60, 20, 21), (20, 20, 61))
    match = match_load("prod", records["prod"], "cand", records["cand"])
    found, mc = matched_effective(match, "ttft"), matched_change(match, "ttft", 50)
    assert found is not None and mc is not None
    assert int(found[0]) == mc.n and found[1] == 101


def test_enough_effective_requests_leave_the_guard_to_its_interval() -> None:
    records = _arms((150, 150, 150), (150, 150, 150))
    report = analyse_arms(
        records, [], {"prod": 1.0, "cand": 1.0}, parse_guards("ttft.p95=+10%"), resamples=100
    )
    item = report.guards[0]
    assert item.effective is None and item.ci is not None
    assert report.to_dict()["guards"][0]["effective_per_arm"] is None
