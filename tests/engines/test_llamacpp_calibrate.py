"""The simulator calibrated from llama-server predicts loads nobody ran (issue 26's acceptance).

A sweep of under 5 minutes (an input-length ladder at concurrency 1, then concurrency 1, 2, 4) of a
llama-server with 2 slots, so concurrency 4 shows the slot limit; the calibrated profile then
predicts held-out concurrency 8 and 16 and a Poisson rate at 70 % of the measured maximum. The
target: TTFT and TPOT at P50 and P95, and E2E at P50, within 10 %. Live latency on two shared cores:
marked timing (retried), and the errors are printed (pytest -s) and written as a markdown table to
$TMPDIR/tokenpace-llamacpp-calibrate.md (the last run's, with the load average) for docs/sim.md. The
procedure itself is calibration_acceptance.py, shared with vLLM's test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engines.calibration_acceptance import SLOTS, run_acceptance
from engines.engines_support import LlamaServer


@pytest.mark.timing
@pytest.mark.xfail(
    reason="the 10 % target is undecided on the 2-vCPU machine (docs/sim.md): the engine's own time per "
    "token moves -24 to +65 % between two runs of the same load a minute apart; with the cores kept awake "
    "the open loop's bias is gone, but single runs scatter by more than the target",
    strict=False,
)
def test_calibrated_profile_predicts_held_out_loads_of_llama_server(
    start_llama_server: Callable[..., LlamaServer], tmp_path: Path
) -> None:
    server = start_llama_server(parallel=SLOTS, context=4096)
    result = run_acceptance(server.url, tmp_path, "llamacpp")
    assert result.calibration_s < 300, f"the calibration sweep took {result.calibration_s:.0f} s"
    assert result.max_num_seqs == SLOTS  # four users, two slots: seen in the data
    assert len({r.load for r in result.rows}) == 3
    # the behaviours were tested on the sweep and said (chosen with its support, or what would decide)
    assert any(b.startswith("step law: ") for b in result.behaviours), result.behaviours
    assert any(b.startswith("scheduler: ") for b in result.behaviours), result.behaviours
    assert not result.misses, result.misses
