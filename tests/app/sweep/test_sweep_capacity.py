"""A sweep's capacity names the trends of the steps it ran off its curve (an --auto sweep's probe, a
short attempt rerun longer) by what they were, as the sweep file and `plan` both keep them."""

from __future__ import annotations

from core.analysis.capacity.test_noise_verdicts import slotted_sweep, trend

from tokenpace.app.sweep.sweep_capacity import capacity


def test_off_curve_steps_trends_are_reported_by_name():
    steps = slotted_sweep(0.0)
    steps[2].pop("time_trend")
    probe = {**slotted_sweep(0.0)[0], "time_trend": trend(-0.6, first=250.0)}
    probe["sweep_step"] = {"index": 1, "phase": "probe", "superseded_as_short": False}
    short = {**slotted_sweep(0.0)[1], "time_trend": trend(-0.3)}
    short["sweep_step"] = {"index": 2, "phase": "step", "superseded_as_short": True}
    doc = capacity(steps, None, off_curve=[probe, short])
    detected = doc["analysis"]["drift"]["detected_figures_stand"]
    assert [d.split(":")[0] for d in detected] == ["probe (run 1)", "short attempt (run 2)"]
    assert doc["plan"]["ceiling_rps_per_replica"] is not None  # the figures stand
    assert doc["plan"]["caveats"] == []
