"""GPU readings from DCGM's names and labels: per GPU, the mean over GPUs, bounds, the steady window."""

from __future__ import annotations

import math

import pytest

from tokenpace.adapters.servermetrics import parse_metrics
from tokenpace.core.analysis.diagnosis.gpu_metrics import (
    MAX_GPUS,
    analyse_gpu,
    readings,
    steady_readings,
)
from tokenpace.testing.dcgm_exporter import page


def _scrape(t_s: float, text: str) -> dict:
    return {"t_ns": int(t_s * 1e9) + 5_000_000_000, "samples": parse_metrics(text)}


def test_nvidia_names_and_labels_are_read_per_gpu():
    got = readings(parse_metrics(page(40, gpus=2, spread=20)))
    assert set(got.values) == {"gpu-node-1/0", "gpu-node-1/1"}
    g0 = got.values["gpu-node-1/0"]
    assert g0 == {
        "util_pct": 40.0,
        "fb_used_mib": 72000.0,
        "power_w": 310.0,
        "sm_clock_mhz": 1980.0,
        "gr_engine_active": 0.4,
    }
    assert got.values["gpu-node-1/1"]["util_pct"] == 60.0
    gpu = got.gpus["gpu-node-1/1"]
    assert (gpu.gpu, gpu.model, gpu.hostname) == ("1", "NVIDIA H100 80GB HBM3", "gpu-node-1")
    assert gpu.uuid.startswith("GPU-")


def test_readings_out_of_range_are_dropped_and_counted():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a"} 250\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} -5\n'
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a"} NaN\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a"} 1000\n'
        'vllm:num_requests_waiting{model_name="m"} 3\n'
    )
    got = readings(parse_metrics(text))
    assert got.dropped == 3
    assert got.values == {"0": {"fb_used_mib": 1000.0}}


def test_no_more_than_max_gpus_are_kept_from_a_page():
    got = readings(parse_metrics(page(50, gpus=MAX_GPUS + 9)))
    assert len(got.values) == MAX_GPUS
    assert got.dropped == 9 * 5  # five fields of each GPU past the bound


def test_series_are_on_the_run_timeline_per_gpu_and_as_the_mean():
    scrapes = [_scrape(t, page(u, gpus=2, spread=10)) for t, u in ((0, 10), (1, 30), (2, 50))]
    scrapes.insert(1, {"t_ns": 5_500_000_000, "error": "timed out"})
    out = analyse_gpu(scrapes, start_ns=5_000_000_000)
    assert out["scrapes"] == 4 and out["errors"] == 1
    assert out["series"]["mean"]["util_pct"] == [[0.0, 15.0], [1.0, 35.0], [2.0, 55.0]]
    assert out["series"]["per_gpu"]["util_pct"]["gpu-node-1/1"] == [[0.0, 20.0], [1.0, 40.0], [2.0, 60.0]]
    assert [g["gpu"] for g in out["gpus"]] == ["0", "1"]


def test_steady_readings_are_the_window_only_with_each_gpu_and_clamped_intervals():
    utils = [0, 0, 90, 100, 90, 100, 90, 100, 0, 0]
    scrapes = [_scrape(t, page(u, gpus=2, spread=0)) for t, u in enumerate(utils)]
    steady = steady_readings(analyse_gpu(scrapes, 5_000_000_000), 2.0, 7.0)
    util = steady["util_pct"]
    assert util["mean"] == 95.0 and util["n"] == 6
    assert util["ci95"][1] <= 100.0  # a mean of a percentage is never over 100
    assert util["per_gpu"] == {"gpu-node-1/0": 95.0, "gpu-node-1/1": 95.0}
    assert steady["power_w"]["mean"] == pytest.approx(70 + 6 * 95)
    assert steady["window_s"] == [2.0, 7.0]


def test_pages_without_dcgm_fields_give_no_series():
    out = analyse_gpu([_scrape(0, 'vllm:num_requests_running{m="x"} 1\n')], 0)
    assert out["series"] == {"mean": {}, "per_gpu": {}} and out["gpus"] == []
    assert not math.isnan(out["dropped_readings"])
