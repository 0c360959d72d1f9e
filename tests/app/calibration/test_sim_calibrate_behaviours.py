"""The scheduler behaviours identified from a sweep of engines whose behaviour is known: the simulator
with a per-step floor (virtual runs) and with prefill-first steps (served, measured over real HTTP,
whose records keep per-token timestamps)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.calibrated import calibrated_profile
from tokenpace.sim.profiles.profile import Profile, get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.testing.procs import FINISHED, run_cli, run_cli_measured

FLOOR_MS = 12.0


def _measured(src: Profile, label: str, load: VirtualLoad) -> MeasuredLoad:
    records = tuple(r.record for r in run_virtual(load, src))
    return MeasuredLoad(label, records, concurrency=load.concurrency or None)


def _sweep(src: Profile, users: tuple[int, ...]) -> list[MeasuredLoad]:
    out = []
    for n in (16, 256, 1024, 2048):
        load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
        out.append(_measured(src, f"c=1 in={n}", load))
    for c in users:
        load = VirtualLoad(parse_length("512"), parse_length("32"), concurrency=c, requests=4 * c, seed=c)
        out.append(_measured(src, f"c={c}", load))
    return out


def _tpot_p50(prof: Profile, users: int) -> float:
    load = VirtualLoad(parse_length("512"), parse_length("32"), concurrency=users, requests=4 * users, seed=7)
    return float(np.median([r.tpot or 0.0 for r in run_virtual(load, prof)]))


def test_a_launch_bound_engine_is_told_a_floor_and_predicts_past_its_kink() -> None:
    """The 8B profile with a 12 ms floor: flat to ~100 users, then its KV reads show. The sweep
    (1 to 256 users) picks the floor by held-out error; the profile predicts 128 users within 10 %."""
    src = get_profile().with_overrides(efficiency={"step_floor_ms": FLOOR_MS})
    fit = fit_engine(_sweep(src, (4, 16, 64, 256)))
    law = fit.behaviours[0]
    assert law.startswith("step law: floor"), law
    assert fit.step_floor * 1e3 == pytest.approx(FLOOR_MS, rel=0.05)
    prof = calibrated_profile(fit, "floor", "m", {"runs": []})
    assert prof.efficiency.step_floor_ms == pytest.approx(FLOOR_MS, rel=0.05)
    for users in (8, 128):  # on the floor, and past its kink: loads the sweep did not run
        assert _tpot_p50(prof, users) == pytest.approx(_tpot_p50(src, users), rel=0.10), users


def test_a_vllm_like_engine_keeps_its_line() -> None:
    fit = fit_engine(_sweep(get_profile(), (4, 16, 64, 256)))
    assert fit.step_floor == 0.0 and not fit.behaviours[0].startswith("step law: floor")


def _served_sweep(profile_file: Path, d: Path) -> str:
    """A ladder and a closed loop of 4 users with long prompts and outputs of varied lengths (so
    newcomers start while others decode), each measured over real HTTP from the profile served by
    the sweep (``--sim``); the calibration's console. The sweeps are this test's setup: measured as
    a setup is (procs.run_cli_measured), so a busy host's stalls leave enough valid steps to fit."""
    for name, args in (
        ("ladder", ["--input-len", "64,512,1024,2048", "-n", "4", "--output-len", "8"]),
        ("conc", ["--concurrency", "1,4", "-n", "24", "--input-len", "2048", "--output-len", "8:40"]),
    ):
        out = ["--out", str(d / f"{name}.json")]
        done = run_cli_measured("sweep", "--sim", str(profile_file), "--keep-going", "--no-store", "-q",
                                "--no-revisit", *out, *args, timeout=180)  # fmt: skip
        assert done.returncode in FINISHED, done.stderr[-2000:]
    done = run_cli("sim", "--calibrate", str(d / "ladder.json"), "--calibrate", str(d / "conc.json"),
                   "--out", str(d / "fit.toml"), "--force")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_prefill_first_steps_are_read_from_the_per_token_gaps(tmp_path: Path) -> None:
    # memory slower than an H100's: its decodes more memory bound, so the two schedulers' predicted
    # gaps lie a weights' read apart (15 ms, not 8), wider than a busy host moves the measured one
    src = get_profile().with_overrides(engine={"chunked_prefill": False}, hardware={"mem_bw_gbs": 1500})
    path = tmp_path / "first.toml"
    path.write_text(profile_to_toml(src))
    out = _served_sweep(path, tmp_path)
    assert re.search(r"^behaviour: scheduler: prefill-first, decodes pause", out, re.M), out
    assert "chunked_prefill = false" in (tmp_path / "fit.toml").read_text()
