"""engine_speeds on the H200 records (tests/data/engines/h200/) and on made-up loads: which loads decoded
at two speeds wave by wave, which only warmed up or held one speed, and a sweep's slow speed fitted apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenpace.app.calibration.calibrate import load_runs
from tokenpace.core.analysis.calibration.engine_drift import waves
from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, timeline
from tokenpace.core.analysis.calibration.engine_speeds import slow_speed, split_speeds, two_speeds
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
    """Two loads whose first waves decoded 4x slower than the rest (a warm-up counts: it is the
    engine at its slow speed): the fast parts keep every fast wave, the slow parts the rest."""
    a = _one_by_one([80.0, 20, 21, 22, 20, 21, 22, 20, 21, 22], "c=1 in=a")
    b = _one_by_one([82.0, 84, 21, 20, 22, 20, 21, 22, 20, 21], "c=1 in=b")
    split = split_speeds([a, b])
    assert split is not None and (split.slow_waves, split.waves) == (3, 20)
    assert [len(ld.records) for ld in split.fast] == [9, 8]
    assert [len(ld.records) for ld in split.slow] == [1, 2]
    assert split_speeds([a]) is None  # one load's slow waves never make a second engine
    assert split_speeds([a, _one_by_one([20.0 + w % 3 for w in range(10)], "c=1 in=c")]) is None


def test_the_slow_speed_is_fitted_apart_and_the_step_law_from_the_fast_waves() -> None:
    """20 ms a step fast, 80 slow: the fit's decode step is the fast one's, and what the slow speed adds
    is recovered (60 ms a step) and said."""
    a = _one_by_one([80.0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=a")
    b = _one_by_one([80.0, 80, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20], "c=1 in=b")
    fit = fit_engine([a, b])
    assert fit.costs.decode_step(1, 0) == pytest.approx(0.0202, rel=0.05)
    assert fit.slow_extra_fixed + fit.slow_extra_per_seq == pytest.approx(0.060, rel=0.05)
    assert any(n.startswith("two speeds: 3 of 24 waves in 2 loads") for n in fit.behaviours), fit.behaviours
    split = split_speeds([a, b])
    assert split is not None
    slow = slow_speed(split, fit.costs)
    assert slow is not None and slow.at_one == pytest.approx(0.0808, rel=0.05)


def test_a_split_that_fits_the_step_no_closer_is_not_a_second_speed() -> None:
    """Most waves at one speed and a few 3x faster (a busy host's llama-server runs parted so, and
    there the few fitted the step 13x worse): a second speed must explain what one speed misfitted.
    Here each load's median step is 60 ms either way, the few fast waves fit no closer, so one speed
    is kept, fitted to all, and the calibration says why."""
    a = _one_by_one([60.0, 61, 62, 60, 61, 62, 60, 61, 20, 20, 62], "c=1 in=a")
    b = _one_by_one([61.0, 60, 62, 61, 60, 20, 21, 62, 60, 61, 60], "c=1 in=b")
    fit = fit_engine([a, b])
    assert fit.slow_extra_fixed == fit.slow_extra_per_seq == 0.0
    assert any(n.startswith("two speeds: not kept") for n in fit.behaviours), fit.behaviours
