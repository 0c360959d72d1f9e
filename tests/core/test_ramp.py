"""Ramp-up: the rate or the users raised over time, and the ramp left out of the steady window."""

from __future__ import annotations

import math
from itertools import islice

import numpy as np
import pytest

from tokenpace.core.record import RequestRecord
from tokenpace.core.schedule.ramp import Ramp, ramp_offsets_s, user_start_offsets_s
from tokenpace.core.steady import steady_state


def _gaps(ramp: Ramp, n: int) -> np.ndarray:
    offsets = list(islice(ramp_offsets_s(ramp, n, np.random.default_rng(0)), n))
    return np.diff(offsets)


def test_a_linear_rate_ramp_over_every_request_goes_from_start_to_end_as_vllm():
    ramp = Ramp("linear", None, 2.0, 20.0)
    assert (ramp.rate_at(0), ramp.rate_at(0.5), ramp.rate_at(1)) == (2.0, 11.0, 20.0)
    gaps = _gaps(ramp, 4000)
    first, last = gaps[:400].mean(), gaps[-400:].mean()
    assert first == pytest.approx(1 / 2.9, rel=0.2) and last == pytest.approx(1 / 19.1, rel=0.2)


def test_an_exponential_ramp_over_a_duration_then_holds_the_end_rate():
    ramp = Ramp("exponential", 10.0, 1.0, 16.0)
    assert ramp.rate_at(0.5) == pytest.approx(4.0)  # geometric: the rate doubles every quarter
    offsets = list(islice(ramp_offsets_s(ramp, 0, np.random.default_rng(1)), 3000))
    after = np.diff([t for t in offsets if t > 12.0])
    assert after.mean() == pytest.approx(1 / 16, rel=0.1)  # held at the end rate
    assert ramp.excluded_s == 10.0 and math.isinf(Ramp("linear", None, 1, 2).excluded_s)


def test_users_join_linearly_or_doubling():
    assert user_start_offsets_s(Ramp("linear", 4.0), 4) == [0.0, 1.0, 2.0, 3.0]
    assert user_start_offsets_s(Ramp("exponential", 3.0), 8) == [0, 1, 1, 2, 2, 2, 2, 3]  # 1, 2, 4, 8


@pytest.mark.parametrize(
    "ramp",
    [Ramp("linear", None, 0.0, 5.0), Ramp("linear", None, 6.0, 5.0), Ramp("linear"), Ramp("sideways", 1.0)],
)
def test_a_ramp_that_cannot_run_is_refused(ramp):
    with pytest.raises(ValueError):
        ramp.validate()


def _run(n: int, gap_ms: int, took_ms: int) -> list[RequestRecord]:
    ms = 1_000_000
    return [
        RequestRecord(f"r{i}", sent_ns=(1 + i * gap_ms) * ms, end_ns=(1 + i * gap_ms + took_ms) * ms)
        for i in range(n)
    ]


def test_the_ramp_is_left_out_of_the_steady_window():
    records = _run(200, 10, 20)  # sends over 1.99 s
    plain = steady_state(records, None)
    ramped = steady_state(records, None, ramp_s=1.0)
    assert ramped.ramp_s == pytest.approx(1.0) and ramped.window_s == pytest.approx(
        plain.window_s - 0.98, abs=0.03
    )
    whole = steady_state(records, None, ramp_s=math.inf)
    assert whole.short and "whole run was a ramp" in whole.reason and whole.window_s == 0
