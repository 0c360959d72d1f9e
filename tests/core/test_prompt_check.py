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


def test_a_constant_few_at_one_asked_length_is_taken_as_a_template_and_said_so():
    check = prompt_check(recs([(512, 526), (512, 526), (512, 527)]))  # 102.7 %: vLLM's chat template
    assert check["template_overhead_tokens"] == 14 and check["mismatch"] is False
    assert check["template_overhead_basis"] == "constant at one length"


def test_a_difference_beyond_a_template_at_one_length_is_still_a_mismatch():
    check = prompt_check(recs([(16, 60), (16, 60)]))
    assert check["template_overhead_tokens"] == 0 and check["mismatch"] is True
