"""Acceptance: a sweep of the simulator read with its own DCGM gauges, where the plan names the step
at which GPU utilisation passed 70 %, the queue beside it, and which came first."""

from __future__ import annotations

import asyncio

from bench_factory import bench_config

from tokenpace.adapters.report.plan_lines import plan_lines
from tokenpace.adapters.report.tables import steps_table
from tokenpace.app.serving.simproc import SimProcess
from tokenpace.app.sweep.sweep import Sweep, SweepConfig


def test_a_sim_sweep_names_the_step_where_utilisation_passed_70_percent():
    # Users far from the engine (90 ms round trips) leave it idle between short answers: one user
    # keeps it busy about half the time, eight nearly always. The engine runs in its own process,
    # as `sweep --sim` runs it: its steps never wait on the client.
    base = dict(input_len="32", output_len="4:24", requests=None, duration_s=5.0, seed=3)
    watch = dict(server_metrics_interval_s=0.25, stall_tolerance=1.0)
    with SimProcess("llama-3.1-8b-h100", ["--network", "cloud-cross-region"]) as url:
        cfg = SweepConfig(
            bench_config(url, model=None, **base, **watch), "concurrency", [1, 2, 8], revisit=False
        )
        doc = asyncio.run(Sweep(cfg, "gpu").run()).to_dict()
    signal = doc["plan"]["scale_out"]
    rows = {r["step"]: r for r in signal["steps"]}
    assert rows[1]["util_decision"] == "below" and rows[3]["util_decision"] == "above"
    util = signal["util_passed"]
    assert util["step"] in (2, 3) and util["after_step"] in (1, 2)
    assert util["decided"] == (util["after_step"] == util["step"] - 1)
    assert signal["queue_climbed"]["step"] is None  # eight users never fill the engine's batch
    assert signal["first"] == "utilisation"
    lines = plan_lines(doc)
    assert any(line.startswith("Scale-out signal: GPU utilisation passed 70 %") for line in lines)
    assert (
        "Scale-out signal: Which comes first: GPU utilisation passed the line before the queue climbed"
        in lines
    )
    headers, table = steps_table(doc)
    util_col = headers.index("GPU util %")
    assert table[0][util_col] < 70 < table[2][util_col]
    assert headers[util_col + 1 : util_col + 3] == ["GPU W", "waiting"]
