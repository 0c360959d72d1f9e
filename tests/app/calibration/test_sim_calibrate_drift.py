"""A calibration sweep's revisit says whether the engine's decode speed moved while it was measured
(engine_drift): decided by the two passes' median intervals, kept as a residual that widens
--validate's intervals, undecided (and said so) when the intervals overlap."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.calibration.engine_costs import EngineFit, StepCosts
from tokenpace.core.analysis.calibration.engine_drift import decode_drift
from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.record import RequestRecord
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_error, fit_provenance
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

COSTS = StepCosts(fixed=0.2e-3, per_seq=0.6e-3, per_context=1e-7, per_token=0.2e-3, rtt=0.5e-3)


def _pass(slower: float, step_cv: float = 0.0, seed: int = 0, requests: int = 40) -> MeasuredLoad:
    """Concurrency 1 of 64-token prompts on an engine whose every cost is `slower` times COSTS."""
    c = StepCosts(
        *(slower * v for v in (COSTS.fixed, COSTS.per_seq, 0.0, COSTS.per_context, COSTS.per_token))
    )
    fit = EngineFit(c, max_num_seqs=2, params=(), residuals={}, holds=(), step_cv=step_cv)
    prof = calibrated_profile(fit, "e", "m", {})
    load = VirtualLoad(parse_length("64"), parse_length("32"), concurrency=1, requests=requests, seed=seed)
    return MeasuredLoad("c=1 in=64", tuple(r.record for r in run_virtual(load, prof)), concurrency=1)


def test_a_decode_step_40_percent_slower_on_the_revisit_is_decided_and_widens_the_validation() -> None:
    first, again = _pass(1.0), _pass(1.4)
    drift = decode_drift(first, again)
    assert drift.moved
    assert drift.change == pytest.approx(0.4, rel=0.05) and drift.low > 0
    loads = [MeasuredLoad(f"c=1 in={n}", _ladder(n), concurrency=1) for n in (16, 128, 512, 1024)] + [first]
    fit = fit_engine(loads, revisits=[(first, again)])
    assert fit.residuals["decode_drift"] == pytest.approx(0.4, rel=0.05)
    assert any("moved +40%" in line for line in fit.holds)
    prof = calibrated_profile(fit, "mine", "m", fit_provenance(fit))
    assert fit_error(prof) == pytest.approx(0.4, rel=0.05)  # the widest of the fit's errors


def test_an_unchanged_engine_is_not_called_drifting_and_noise_leaves_it_undecided() -> None:
    same = decode_drift(_pass(1.0), _pass(1.0))
    assert not same.moved and same.change == pytest.approx(0.0, abs=1e-9)
    # Step noise of CV 0.3 and a 5 % slower engine: the medians' intervals overlap, so no verdict.
    noisy = decode_drift(_pass(1.0, 0.3, seed=1), _pass(1.05, 0.3, seed=2))
    assert not noisy.moved and "undecided" in noisy.note
    assert noisy.low < 0.05 < noisy.high


def test_a_revisit_too_short_to_check_says_so_and_leaves_the_validation_alone() -> None:
    first, again = _pass(1.0), _pass(1.4, requests=6)
    drift = decode_drift(first, again)
    assert not drift.moved and "not checked, 40 and 6 requests" in drift.note
    loads = [MeasuredLoad(f"c=1 in={n}", _ladder(n), concurrency=1) for n in (16, 128, 512, 1024)] + [first]
    fit = fit_engine(loads, revisits=[(first, again)])
    assert "decode_drift" not in fit.residuals
    assert drift.note in fit.holds


def _ladder(n: int) -> tuple[RequestRecord, ...]:
    fit = EngineFit(COSTS, max_num_seqs=2, params=(), residuals={}, holds=())
    load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
    return tuple(r.record for r in run_virtual(load, calibrated_profile(fit, "e", "m", {})))
