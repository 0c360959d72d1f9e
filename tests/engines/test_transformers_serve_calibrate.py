"""Issue 26's calibration acceptance (calibration_acceptance.py) on `transformers serve
--continuous-batching` on CPU, as on llama-server and vLLM: calibrate from a sweep of under 5 minutes,
predict held-out concurrency 8 and 16 and a Poisson rate at 70 % of the measured maximum.

Judged as issue 39 asks: the closed loops' P50s (TTFT, TPOT, E2E) within 10 % where the engine held
still, which the procedure decides (a miss counts only where the prediction's whole interval lies
beyond 10 % plus the engine's own change between two runs of concurrency 8), on every load the
validation vouched for; a load it called missed or undecided must say why. The open loop and the
P95s are printed (pytest -s) and written to $TMPDIR/tokenpace-transformers-serve-calibrate.md for
docs/sim.md, not asserted. Live latency on two shared cores: marked timing (a decided miss is
retried); where no closed loop had valid evidence (its steps NOT VALID: the client stalled on busy
cores) the verdict is undecided and the test reports xfail with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engines.calibration_acceptance import run_acceptance
from engines.engines_support import TransformersServe

CLOSED_LOOPS = {"c=8 in=64", "c=16 in=64"}


@pytest.mark.timing
def test_calibrated_profile_predicts_closed_loops_of_transformers_serve(
    start_transformers_serve: Callable[..., TransformersServe], tmp_path: Path
) -> None:
    server = start_transformers_serve()  # its own: the quirk tests' requests are not in its warm-up
    try:
        result = run_acceptance(server.url, tmp_path, "transformers-serve", model=server.model)
    finally:
        server.stop()
    assert result.calibration_s < 300, f"the calibration sweep took {result.calibration_s:.0f} s"
    judged = CLOSED_LOOPS & {r.load for r in result.rows}
    # Held to the tool's own word: where it vouched for a closed loop (verdict "met"), the P50s are
    # within 10 % beyond the engine's change; where it called a load missed or undecided it gave its
    # reason (the engine moved, a load past what the calibration saw) instead of predicting.
    vouched = result.vouched(judged)
    closed_p50 = [m for m in result.decided_misses if m[0] in vouched and m[2] == 50]
    assert not closed_p50, closed_p50
    for load in judged - vouched:
        assert result.verdicts.get(load) in ("missed", "undecided"), (load, result.verdicts)
        if result.verdicts[load] == "undecided":
            assert result.notes.get(load), f"{load} undecided with no reason given"
    if not vouched:
        # Steps NOT VALID (the client stalled on the busy cores), an engine that moved, or loads past
        # what the calibration saw: the tool said it could not vouch, so there is nothing to hold it to.
        pytest.xfail(f"undecided: the tool vouched for no closed loop ({result.verdicts})")
