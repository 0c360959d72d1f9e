"""The simulator's DCGM gauges: utilisation from the steps' occupancy, the power model, NVIDIA's labels."""

from __future__ import annotations

import pytest

from tokenpace.adapters.servermetrics import parse_metrics
from tokenpace.core.analysis.diagnosis.gpu_metrics import readings
from tokenpace.sim import get_profile
from tokenpace.sim.endpoints.gpu_gauges import IDLE_SHARE, MAX_STEPS, GpuGauges


def _read(g: GpuGauges, now: float) -> dict:
    got = readings(parse_metrics("\n".join(g.render(now)) + "\n"))
    return got.values["tokenpace-sim/0"]


def test_utilisation_is_the_share_of_the_last_second_the_steps_ran():
    g = GpuGauges(get_profile("llama-3.1-8b-h100"))
    assert _read(g, 10.0)["util_pct"] == 0.0
    for i in range(30):  # 30 steps of 10 ms in the last second: 0.3 s busy
        g.step(9.2 + i * 0.02, 9.21 + i * 0.02, 4)
    assert _read(g, 10.0)["util_pct"] == 30.0
    assert _read(g, 10.0)["gr_engine_active"] == pytest.approx(0.3)
    assert _read(g, 11.5)["util_pct"] == 0.0  # a second later, idle again
    g.step(10.9, 11.1, 1)  # a step running past now counts up to now only
    assert _read(g, 11.0)["util_pct"] == pytest.approx(10.0)


def test_power_rises_from_idle_with_occupancy_and_a_fuller_batch():
    profile = get_profile("llama-3.1-8b-h100")
    idle = _read(GpuGauges(profile), 5.0)
    assert idle["power_w"] == pytest.approx(IDLE_SHARE * 700) and idle["sm_clock_mhz"] < 1000
    small, full = GpuGauges(profile), GpuGauges(profile)
    small.step(4.0, 5.0, 1)
    full.step(4.0, 5.0, profile.engine.max_num_seqs)
    assert idle["power_w"] < _read(small, 5.0)["power_w"] < _read(full, 5.0)["power_w"] == pytest.approx(700)
    assert _read(full, 5.0)["sm_clock_mhz"] == 1980.0


def test_every_gpu_of_the_profile_is_exported_with_nvidias_labels():
    g = GpuGauges(get_profile("llama-3.1-70b-h100-tp4"), worker=2)
    text = "\n".join(g.render(1.0))
    got = readings(parse_metrics(text + "\n"))
    assert len(got.values) == 4
    gpu = got.gpus["tokenpace-sim/3"]
    assert (gpu.gpu, gpu.uuid, gpu.model) == ("3", "GPU-tokenpace-sim-2-3", "NVIDIA H100 SXM 80GB")
    assert text.count("# TYPE DCGM_FI_DEV_GPU_UTIL gauge") == 1


def test_the_steps_remembered_are_bounded():
    g = GpuGauges(get_profile("llama-3.1-8b-h100"))
    for i in range(MAX_STEPS + 100):
        g.step(i * 1e-4, i * 1e-4 + 5e-5, 1)
    assert len(g.steps) == MAX_STEPS
