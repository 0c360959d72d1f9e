"""engine_speeds.two_speeds on the H200 records (tests/data/engines/h200/): which loads decoded at two
speeds wave by wave, and which only warmed up or held one speed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenpace.app.calibration.calibrate import load_runs
from tokenpace.core.analysis.calibration.engine_drift import waves
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline
from tokenpace.core.analysis.calibration.engine_speeds import two_speeds

DATA = Path(__file__).resolve().parents[3] / "data" / "engines" / "h200"


@pytest.fixture(scope="module")
def loads() -> dict[str, MeasuredLoad]:
    runs = load_runs([str(DATA / f) for f in ("conc.json", "held.json", "rate.json")])
    return {ld.label: ld for run in runs for ld in run.loads if not ld.label.startswith("c=1 ")}


def test_the_32_user_loop_went_slow_fast_and_slow_again(loads: dict[str, MeasuredLoad]) -> None:
    s = two_speeds(loads["c=32 in=256"])
    assert s is not None
    assert (s.slow_waves, s.waves) == (6, 18)  # two cycles of users (1 + 22 + 9 admitted) of seven
    assert 20 < s.fast_ms < 24 and 90 < s.slow_ms < 98
    assert s.surely > 2.5 and s.change > s.surely  # every slow wave 3.6x or more the slowest fast one
    assert "two decode speeds at c=32 in=256: 6 of its 18 waves" in s.note


@pytest.mark.parametrize(
    "label",
    [
        "c=4 in=256",  # slow only in its first cycle: a warm-up
        "c=16 in=256",  # the same
        "c=64 in=256",  # slow for two cycles, then fast: a (long) warm-up, never back
        "c=128 in=256",  # slow throughout: one speed
        "17.05/s in=256",  # the Poisson load: slow throughout
    ],
)
def test_a_warm_up_or_one_speed_is_not_two(loads: dict[str, MeasuredLoad], label: str) -> None:
    assert two_speeds(loads[label]) is None


def test_what_docs_sim_md_reads_from_the_waves(loads: dict[str, MeasuredLoad]) -> None:
    """The facts docs/sim.md builds its reading of the misses on: 128 users and the Poisson load decoded
    at the slow speed throughout; the 64-user step slow first (its trimmed warm-up and one cycle more),
    then fast."""

    def ms(label: str) -> np.ndarray:
        tl = timeline(loads[label].records)
        assert tl is not None
        return waves(tl)[1] * 1e3

    assert ms("c=128 in=256").min() > 120 and ms("17.05/s in=256").min() > 70
    c64 = ms("c=64 in=256")
    slow = c64 > 2 * c64.min()
    assert slow[:8].all() and not slow[8:].any()  # two cycles of 4 waves slow, then fast, not back
