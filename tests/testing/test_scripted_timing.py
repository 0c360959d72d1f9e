"""The scripted server's timing: a first-token spread drawn request by request, within its range,
the same draws for the same seed, none without it."""

from __future__ import annotations

from tokenpace.testing.scripted_timing import Behaviour, Timing


def _delays(behaviour: Behaviour, n: int = 200) -> list[float]:
    timing = Timing(behaviour, started=0.0)
    return [timing.first_token_delay(0.02, 0.0) for _ in range(n)]


def test_a_ttft_spread_is_drawn_per_request_within_its_range_and_repeatable() -> None:
    spread = _delays(Behaviour(ttft_spread_s=0.06, speed_seed=1))
    assert all(0.02 <= d <= 0.08 for d in spread)
    assert max(spread) - min(spread) > 0.05 and len(set(spread)) == len(spread)
    assert spread == _delays(Behaviour(ttft_spread_s=0.06, speed_seed=1))
    assert spread != _delays(Behaviour(ttft_spread_s=0.06, speed_seed=2))
    assert set(_delays(Behaviour())) == {0.02}
