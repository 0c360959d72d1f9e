"""The step-noise fit on a real engine's kind of records: per-token timestamps of requests decoding alone,
made here from a known process (a lognormal step factor whose log is AR(1) from step to step)."""

from __future__ import annotations

import math
import random

import pytest

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.analysis.calibration.step_noise_fit import fit_step_noise, mean_variance_ratio
from tokenpace.core.record import RequestRecord

STEP_NS = 1_000_000  # 1 ms decode steps
TOKENS = 33


def _records(sigma: float, rho: float, n: int, seed: int = 1) -> tuple[RequestRecord, ...]:
    """n requests one after another (concurrency 1), 33 tokens each, the step factor's log an AR(1)."""
    rng = random.Random(seed)
    x = rng.gauss(0, 1)
    t = 0
    out = []
    for i in range(n):
        sent = t
        tokens = [sent + 10 * STEP_NS]
        for _ in range(TOKENS - 1):
            x = rho * x + math.sqrt(1 - rho * rho) * rng.gauss(0, 1)
            tokens.append(tokens[-1] + round(STEP_NS * math.exp(sigma * x - sigma * sigma / 2)))
        out.append(
            RequestRecord(
                request_id=str(i), index=i, sent_ns=sent, first_token_ns=tokens[0], end_ns=tokens[-1],
                token_ns=tokens, output_tokens_server=TOKENS, prompt_tokens=64,
            )
        )  # fmt: skip
        t = tokens[-1] + 2 * STEP_NS
    return tuple(out)


@pytest.mark.parametrize(("sigma", "rho"), [(0.3, 0.0), (0.3, 0.9)])
def test_cv_and_correlation_time_are_recovered_from_per_token_timestamps(sigma: float, rho: float) -> None:
    fit = fit_step_noise([MeasuredLoad("c=1", _records(sigma, rho, 300), concurrency=1)])
    cv = math.sqrt(math.expm1(sigma * sigma))
    # 9,600 gaps: the robust sd of their log is within ~2 % (its relative standard error ~1.16 / sqrt(n),
    # inflated by the correlation); 10 % leaves room for the AR(1)'s fewer independent draws.
    assert fit.cv == pytest.approx(cv, rel=0.10)
    if rho == 0:
        assert fit.hold_s < 0.5e-3  # at most a fraction of a step: independent
    else:
        # hold = -gap / ln(rho): 9.5 ms for 0.9 at 1 ms steps; the TPOT spread of 300 requests sets rho
        # through var(mean)/var(step), whose standard error (~8 % on the sd) moves hold by ~30 %.
        assert fit.hold_s == pytest.approx(-1e-3 / math.log(rho), rel=0.4)
    assert {p.name for p in fit.params if p.identified} >= {"step_cv"}


def test_too_few_requests_alone_leave_the_steps_exact_and_say_why() -> None:
    fit = fit_step_noise([MeasuredLoad("c=1", _records(0.3, 0.0, 6), concurrency=1)])
    assert fit.cv == 0 and not fit.params[0].identified and "concurrency 1" in fit.params[0].how


def test_the_variance_of_a_mean_shrinks_by_m_for_independent_steps_and_not_at_all_when_fixed() -> None:
    assert mean_variance_ratio(0.0, 31) == pytest.approx(1 / 31)
    assert mean_variance_ratio(0.999999, 31) == pytest.approx(1.0, rel=1e-3)
