"""Asked vs server prompt tokens: a chat template's constant overhead is not a mismatch."""

import pytest

from tokenpace.core.breakdown import prompt_check
from tokenpace.core.record import RequestRecord


def recs(pairs):
    return [
        RequestRecord(f"r{i}", sent_ns=1, prompt_tokens_requested=a, prompt_tokens=s)
        for i, (a, s) in enumerate(pairs)
    ]


def test_constant_template_overhead_is_separated():
    check = prompt_check(recs([(20, 28), (50, 58), (100, 108)]))
    assert check["template_overhead_tokens"] == 8
    assert check["server_over_asked_without_template"] == pytest.approx(1.0)
    assert check["mismatch"] is False


def test_a_proportional_error_is_still_a_mismatch():
    check = prompt_check(recs([(100, 130), (200, 260), (400, 520)]))
    assert check["template_overhead_tokens"] == 0
    assert check["mismatch"] is True


def test_small_spread_within_tolerance_is_fine():
    check = prompt_check(recs([(500, 504), (500, 505), (1000, 1004)]))
    assert check["template_overhead_tokens"] == 4 and check["mismatch"] is False


def test_one_asked_length_cannot_tell_template_from_error():
    check = prompt_check(recs([(16, 23), (16, 23)]))
    assert check["template_overhead_tokens"] == 0 and check["mismatch"] is True
