"""A gray release at 5 % of a service at 10 requests/s, judged with the anytime guards at looks
every 30 minutes, stopping at the first decision: a candidate truly equal to production is
promoted within the hour (and says the traffic it needed); one truly +2 pp worse on errors is
rolled back; neither ever the wrong way over 20 simulated rollouts each. (At a production error
rate of 0.5 % rather than 0.1 %, +0.5 pp takes about 1.5 hours at this traffic: the guard says so.)"""

from __future__ import annotations

import numpy as np

from tokenpace.core.analysis.rollout.arms import HOLD, PROMOTE, ROLL_BACK, analyse_arms
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000
RATE, STEP = 10.0, 0.05  # requests/s of the service, the candidate's share
GUARDS = parse_guards("ttft.p95=+10%,error_rate=+0.5pp")
BASE_ERRORS = 0.001  # a healthy service: 1 request in 1000 fails


def _traffic(rng: np.random.Generator, seconds: float, cand_errors: float) -> dict[str, list[RequestRecord]]:
    n = rng.poisson(RATE * seconds)
    at = np.sort(rng.uniform(0, seconds, n))
    arm = np.where(rng.random(n) < STEP, "b", "a")
    ttft = 200 * rng.lognormal(0, 0.3, n)
    fail = rng.random(n) < np.where(arm == "b", cand_errors, BASE_ERRORS)
    out: dict[str, list[RequestRecord]] = {"a": [], "b": []}
    for i in range(n):
        r = RequestRecord(
            request_id=f"r{i}", sent_ns=int(at[i] * 1e9) + 1, labels={"arm": str(arm[i]), "user": f"u{i}"}
        )
        r.status = Status.HTTP_ERROR if fail[i] else Status.OK
        if not fail[i]:
            r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft[i] * MS)
            r.token_ns = [r.first_token_ns + k * 20 * MS for k in range(4)]
            r.output_tokens_counted = 4
            r.end_ns = r.token_ns[-1]
        out[str(arm[i])].append(r)
    return out


def _rollout(seed: int, cand_errors: float, hours: float) -> tuple[str, float, str]:
    rng = np.random.default_rng(seed)
    full = _traffic(rng, hours * 3600, cand_errors)
    for minutes in range(30, int(hours * 60) + 1, 30):
        cut = minutes * 60 * 1e9
        window = {a: [r for r in rs if r.sent_ns <= cut] for a, rs in full.items()}
        report = analyse_arms(window, [], {"a": 1 - STEP, "b": STEP}, GUARDS, resamples=40, seed=seed)
        if report.verdict != HOLD:
            break
    reasons = " | ".join(g.reason for g in report.guards)
    return report.verdict, minutes, reasons


def test_an_equal_candidate_is_promoted_within_the_hour_and_never_rolled_back() -> None:
    runs = [_rollout(seed, BASE_ERRORS, 2.0) for seed in range(20)]
    assert all(v == PROMOTE for v, _, _ in runs), [r for r in runs if r[0] != PROMOTE][:2]
    assert sum(minutes <= 60 for _, minutes, _ in runs) >= 18  # 9 in 10 within the hour
    assert all("decided at" in reasons and "requests per arm" in reasons for _, _, reasons in runs)


def test_a_candidate_2pp_worse_on_errors_is_rolled_back_and_never_promoted() -> None:
    runs = [_rollout(100 + seed, BASE_ERRORS + 0.02, 4.0) for seed in range(20)]
    assert all(v != PROMOTE for v, _, _ in runs)
    assert all(v == ROLL_BACK for v, _, _ in runs), [r for r in runs if r[0] != ROLL_BACK][:2]
