"""engine_speeds on the H200 records (tests/data/engines/h200/) and on made-up loads: which loads decoded
at two speeds wave by wave, which only warmed up or held one speed, and a sweep's slow speed fitted apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenpace.app.calibration.calibrate import load_runs
from tokenpace.core.analysis.calibration.engine_costs import StepCosts
from tokenpace.core.analysis.calibration.engine_drift import waves
from tokenpace.core.analysis.calibration.engine_fit import KEEP_MARGIN, fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline
from tokenpace.core.analysis.calibration.engine_speeds import (
    SlowSpeed,
    _extra_line,
    slow_speed,
    slow_throughout,
    speed_misfit,
    split_speeds,
    two_speeds,
)
from tokenpace.core.record import RequestRecord

MS = 1_000_000
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


def _one_by_one(step_ms: list[float], label: str = "c=1") -> MeasuredLoad:
    """One request a second, 12 tokens each, request w's steps lasting step_ms[w]: each its own wave."""
    recs = []
    for w, step in enumerate(step_ms):
        sent = (w + 1) * 1000 * MS
        tokens = [sent + (20 + w % 3) * MS]
        for k in range(11):
            tokens.append(tokens[-1] + round(step * (1 + 0.01 * (k % 3)) * MS))
        recs.append(
            RequestRecord(
                request_id=str(w), index=w, sent_ns=sent, first_token_ns=tokens[0], end_ns=tokens[-1],
                token_ns=tokens, output_tokens_server=12, prompt_tokens=64 + 64 * (w % 4),
            )
        )  # fmt: skip
    return MeasuredLoad(label=label, records=tuple(recs), concurrency=1)


def test_back_and_forth_is_two_speeds_with_its_sure_size() -> None:
    s = two_speeds(_one_by_one([20.0, 21, 22, 20, 60, 62, 61, 60, 20, 22, 21, 20, 61, 60, 62, 60, 20]))
    assert s is not None and s.slow_waves == 8 and s.waves == 16  # the last request: the drain
    assert s.surely == pytest.approx(60 / 22 - 1, rel=0.03) and s.most == pytest.approx(62 / 20 - 1, rel=0.03)
    d = s.as_drift()
    assert d.moved and d.low == s.surely and d.high == s.most


@pytest.mark.parametrize(
    "steps",
    [
        [60.0, 61, 62, 20, 21, 22, 20, 21, 22, 20, 21],  # slow only at the start: a warm-up
        [20.0, 24, 28, 32, 36, 40, 44, 48, 52, 56, 20],  # spread, but no jump of 2x between neighbours
        [20.0, 21, 22, 20, 21, 60, 22, 20, 21, 22, 20],  # one slow wave: MIN_SIDE not reached
    ],
)
def test_no_second_speed_where_the_waves_do_not_show_one(steps: list[float]) -> None:
    assert two_speeds(_one_by_one(steps)) is None


def test_the_calibration_leaves_a_two_speed_load_out_of_the_step_law() -> None:
    steady = [_one_by_one([20.0 + (w % 3) for w in range(17)], "c=1 in=a")]
    moving = _one_by_one([20.0, 21, 22, 20, 60, 62, 61, 60, 20, 22, 21, 20, 61, 60, 62, 60, 20], "c=1 in=b")
    fit = fit_engine([*steady, moving])
    assert any(n.startswith("two decode speeds at c=1 in=b") for n in fit.moved_within), fit.moved_within
    assert fit.residuals["decode_drift"] == pytest.approx(60 / 22 - 1, rel=0.03)


def test_a_sweep_whose_loads_show_a_slow_speed_is_split_by_wave() -> None:
    """Two loads whose first waves decoded 4x slower than the rest, one of them slow again later:
    the fast parts keep every fast wave, the slow parts the rest (the warm-up counts, as the engine at
    its slow speed, once a load went back to it after running fast)."""
    a = _one_by_one([80.0, 20, 21, 22, 20, 21, 22, 20, 21, 22], "c=1 in=a")
    b = _one_by_one([82.0, 84, 21, 20, 22, 20, 83, 22, 20, 21], "c=1 in=b")
    split = split_speeds([a, b])
    assert split is not None and (split.slow_waves, split.waves) == (4, 20)
    assert [len(ld.records) for ld in split.fast] == [9, 7]
    assert [len(ld.records) for ld in split.slow] == [1, 3]
    assert split.returned == ("c=1 in=b",) and split.parted == (True, True)
    assert split_speeds([b]) is None  # one load's slow waves never make a second engine
    assert split_speeds([b, _one_by_one([20.0 + w % 3 for w in range(10)], "c=1 in=c")]) is None


def test_warm_ups_alone_are_no_second_speed() -> None:
    """Every load slow at its start only: a start-up cost, not a speed a load can run at throughout."""
    a = _one_by_one([80.0, 20, 21, 22, 20, 21, 22, 20, 21, 22], "c=1 in=a")
    b = _one_by_one([82.0, 84, 21, 20, 22, 20, 21, 22, 20, 21], "c=1 in=b")
    assert split_speeds([a, b]) is None
    fit = fit_engine([a, b])
    assert fit.slow_extra_fixed == fit.slow_extra_per_seq == 0.0


def test_on_the_h200_sweep_the_warm_ups_alone_declare_no_second_speed() -> None:
    """The ladder and the sweep without the 64-user step (the one load that went back to the slow
    speed after running fast): every load's first wave was slow, and that alone is one speed."""
    runs = load_runs([str(DATA / f) for f in ("ladder.json", "conc.json")])
    warm_only = [ld for run in runs for ld in run.loads if ld.label != "c=64 in=256"]
    assert split_speeds(warm_only) is None
    assert fit_engine(warm_only).slow_extra_fixed == 0.0


def test_a_load_slow_throughout_goes_to_the_slow_side_not_into_the_fast_fit() -> None:
    """The held-out loads calibrated from too: 128 users ran slow throughout, no jump within it. Told by
    the loads that parted, it joins the slow waves; the fast step law is the one without it."""
    runs = load_runs([str(DATA / f) for f in ("ladder.json", "conc.json")])
    base = fit_engine([ld for run in runs for ld in run.loads])
    runs = load_runs([str(DATA / f) for f in ("ladder.json", "conc.json", "held.json")])
    fit = fit_engine([ld for run in runs for ld in run.loads])
    said = next(b for b in fit.behaviours if b.startswith("two speeds:"))
    assert "c=128 in=256 ran at it throughout" in said and "c=32 in=256" in said, said
    assert fit.costs.decode_step(64, 0) == pytest.approx(base.costs.decode_step(64, 0), rel=0.05)
    slow_128 = fit.costs.decode_step(128, 0) + fit.slow_extra_fixed + 128 * fit.slow_extra_per_seq
    assert 0.115 < slow_128 < 0.155  # its waves decoded at 117-160 ms a token


def test_the_slow_speed_is_fitted_apart_and_the_step_law_from_the_fast_waves() -> None:
    """20 ms a step fast, 80 slow: the fit's decode step is the fast one's, and what the slow speed adds
    is recovered (60 ms a step), said, and kept: over the same requests it misfits far less."""
    a = _one_by_one([80.0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=a")
    b = _one_by_one([80.0, 20, 20, 20, 20, 80, 80, 20, 20, 20, 20, 20], "c=1 in=b")
    fit = fit_engine([a, b])
    assert fit.costs.decode_step(1, 0) == pytest.approx(0.0202, rel=0.05)
    assert fit.slow_extra_fixed + fit.slow_extra_per_seq == pytest.approx(0.060, rel=0.05)
    said = next(n for n in fit.behaviours if n.startswith("two speeds:"))
    assert said.startswith("two speeds: 4 of 24 waves in 2 loads") and "c=1 in=b went back" in said
    assert "Kept: over the same requests" in said
    split = split_speeds([a, b])
    assert split is not None
    slow = slow_speed(split, fit.costs)
    assert isinstance(slow, SlowSpeed) and slow.at_one == pytest.approx(0.0808, rel=0.05)
    one, two = speed_misfit(split, StepCosts(fixed=0.040), fit.costs, slow)
    assert two < 0.05 < 0.4 < one


def test_slow_waves_the_fast_fit_already_prices_are_no_second_speed() -> None:
    """A fit that prices the 'slow' waves near themselves (as on a busy host's llama-server, where the
    waves parted at 2x but the step law, joining prefills priced, left the slow ones 1.4x the fast fit's
    step): no slow speed, and why."""
    a = _one_by_one([80.0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=a")
    b = _one_by_one([80.0, 20, 20, 20, 20, 80, 80, 20, 20, 20, 20, 20], "c=1 in=b")
    split = split_speeds([a, b])
    assert split is not None
    why = slow_speed(split, StepCosts(fixed=0.060))
    assert isinstance(why, str) and "is not 1.4x the fast fit's (60 ms)" in why


def test_two_speeds_that_misfit_no_less_are_not_kept() -> None:
    """The margin: two speeds each at its own waves must misfit the decode step a quarter less than
    one speed over the same requests; here the slow speed's extra is priced wrong (20 ms where the
    waves show 60), and the two speeds' misfit is no better than one speed's."""
    a = _one_by_one([80.0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=a")
    b = _one_by_one([80.0, 20, 20, 20, 20, 80, 80, 20, 20, 20, 20, 20], "c=1 in=b")
    split = split_speeds([a, b])
    assert split is not None
    fast = StepCosts(fixed=0.020)
    wrong = SlowSpeed(0.005, 0.0, 0.025, 0.0, (1.0, 1.0), "")
    one, two = speed_misfit(split, StepCosts(fixed=0.025), fast, wrong)
    assert two > (1 - KEEP_MARGIN) * one


def test_steps_on_a_floor_are_priced_on_it() -> None:
    """A launch-bound engine: its fast fit's line is 5 ms at batch 1 but no step takes under its 20 ms
    floor (the simulator runs max(floor, line)). The keep rule and the slow speed price the steps so:
    the two speeds fit these waves exactly on the floor, and are far off without it."""
    a = _one_by_one([80.0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=a")
    b = _one_by_one([80.0, 20, 20, 20, 20, 80, 80, 20, 20, 20, 20, 20], "c=1 in=b")
    split = split_speeds([a, b])
    assert split is not None
    line = StepCosts(fixed=0.005)
    slow = slow_speed(split, line, floor=0.020)
    assert isinstance(slow, SlowSpeed)
    assert slow.extra_fixed + slow.extra_per_seq == pytest.approx(0.075, rel=0.05)  # over the line
    assert slow.at_one == pytest.approx(0.080, rel=0.05) and "past its floor of 20 ms" in slow.note
    one, floored = speed_misfit(split, StepCosts(fixed=0.005), line, slow, (0.040, 0.020))
    _, blind = speed_misfit(split, StepCosts(fixed=0.005), line, slow)
    assert floored < 0.05 < 0.5 < blind and floored < (1 - KEEP_MARGIN) * one


def test_a_slow_line_that_would_start_below_zero_goes_through_zero() -> None:
    """Extras of 15 ms at batch 16 and 100 ms at 64: the line through them starts at -13 ms. Clamping
    its start to 0 and keeping its slope would overprice every batch; through zero it fits both."""
    fixed, per_seq = _extra_line(np.array([16.0, 64.0]), np.array([0.015, 0.100]), np.ones(2))
    assert fixed == 0.0 and per_seq == pytest.approx((16 * 0.015 + 64 * 0.100) / (16**2 + 64**2))
    fixed, per_seq = _extra_line(np.array([16.0, 64.0]), np.array([0.080, 0.060]), np.ones(2))
    assert fixed == pytest.approx(0.070) and per_seq == 0.0  # falling: a level, never faster


def test_a_load_past_the_sure_loads_batches_is_not_judged_slow_throughout() -> None:
    """The H200's 128-user loop, priced by a fit that saw batches up to 10: a guess 13x out, not a sure
    fast speed to call it slow against; within twice the batches seen it is judged."""
    runs = load_runs([str(DATA / f) for f in ("ladder.json", "conc.json", "held.json")])
    split = split_speeds([ld for run in runs for ld in run.loads])
    assert split is not None
    cheap = StepCosts(fixed=0.020)
    assert "c=128 in=256" in slow_throughout(split, cheap, 0.0, batch_seen=64.0).throughout
    assert "c=128 in=256" not in slow_throughout(split, cheap, 0.0, batch_seen=10.0).throughout
