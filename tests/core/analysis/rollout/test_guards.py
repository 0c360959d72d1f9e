"""What would decide an undecided guard: sized to the estimate's distance from the limit, so never
fewer requests than already in, and no count at all for an estimate on the limit."""

from __future__ import annotations

import math

from tokenpace.core.analysis.rollout.guards import Evidence, anytime_interval, judge, needed, parse_guards

E2E = parse_guards("e2e.p50=+10%")[0]
SE = 0.015026  # on the log scale: the anytime interval of +14.4 % at this SE is [+9.3 %, +19.7 %]
UNIT = "requests at matched load"


def test_an_estimate_beyond_the_limit_asks_for_more_than_it_has() -> None:
    # A rerun's case: +14.4 % [+9.3 %, +19.7 %] straddles +10 % at 47 effective requests an arm. The
    # half-width to reach is the estimate's distance from the limit (4.4 points), not half the
    # limit: sized to half the limit it asked for 44, fewer than the 47 in.
    ev = Evidence(0.14375, SE, 47, UNIT, 9.71)
    lo, hi = anytime_interval(E2E, ev, 0.05) or (0.0, 0.0)
    assert (round(lo, 3), round(hi, 3)) == (0.093, 0.197)
    item = judge(E2E, "candidate", ev)
    assert item.outcome == "undecided" and item.needed is not None
    assert 60 <= item.needed <= 80  # (half-width / distance)^2 = 1.36 times, plus the mixture's growth
    assert f"about {item.needed} {UNIT} per arm would decide it (n 47 now)" in item.reason
    assert "about 0 s" not in item.reason


def test_the_count_grows_as_the_estimate_nears_the_limit() -> None:
    counts = [needed(E2E, Evidence(change, SE, 47), 0.05) for change in (0.16, 0.14, 0.12, 0.105)]
    assert all(c is not None and c > 47 for c in counts)
    assert counts == sorted(counts) and len(set(counts)) == 4  # type: ignore[type-var]


def test_an_estimate_on_the_limit_has_no_count() -> None:
    item = judge(E2E, "candidate", Evidence(0.10, SE, 47, UNIT, 9.71))
    assert item.outcome == "undecided" and item.needed is None
    assert "sits at the limit: no finite traffic decides it" in item.reason


def test_at_least_one_more_request_than_now() -> None:
    # Just undecided: the interval's edge touches the limit; the next request may decide it.
    ci = anytime_interval(E2E, Evidence(0.2, SE, 47), 0.05)
    assert ci is not None
    half = math.log1p(0.2) - math.log1p(ci[0])  # on the log scale
    edge = math.expm1(math.log1p(0.1) + 0.999 * half)  # the lower bound a hair under +10 %
    assert judge(E2E, "candidate", Evidence(edge, SE, 47)).outcome == "undecided"
    assert needed(E2E, Evidence(edge, SE, 47), 0.05) == 48


def test_a_share_guard_is_sized_to_its_distance_too() -> None:
    errors = parse_guards("error_rate=+0.5pp")[0]
    ev = Evidence(0.008, 0.002, 400, "requests", 4.0)  # +0.8 pp against +0.5 pp
    item = judge(errors, "candidate", ev)
    assert item.outcome == "undecided" and item.needed is not None and item.needed > 400
    # a good event's guard (it may fall by at most 2 points): the line is at -2 pp
    done = parse_guards("task_completed=-2pp")[0]
    assert (needed(done, Evidence(-0.03, 0.004, 400), 0.05) or 0) > 400
    assert needed(done, Evidence(-0.02, 0.004, 400), 0.05) is None


def test_a_decided_guard_says_where_it_decided() -> None:
    item = judge(E2E, "candidate", Evidence(0.30, SE, 47, UNIT))
    assert item.outcome == "breached" and item.needed == 47 and "decided at 47" in item.reason
