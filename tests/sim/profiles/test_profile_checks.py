"""Hostile profile files through the CLI (`tokenpace sim --profile FILE`): every value checked
(profile_checks.py), nesting bounded (adapters/toml_text.py): one line, exit 2, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenpace.sim.profiles.profile import get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.testing.procs import run_cli

DEEP = "\n[deep]\nx = " + "[" * 5000 + "]" * 5000 + "\n"


def _edit(text: str, key: str, value: str) -> str:
    edited, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
    assert n == 1, key
    return edited


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("gpus", "nan", "hardware.gpus = nan is not a whole number"),
        ("block_size", "0", "engine.block_size = 0 is not a whole number from 1"),
        ("block_size", "-5", "engine.block_size = -5 is not a whole number from 1"),
        ("params_b", "1e308", "model.params_b = 1e+308 is not a number from"),
        ("params_b", "1" + "0" * 400, "model.params_b = 1000"),  # an int past any float
        ("gpus", "1" + "0" * 400, "hardware.gpus = 1000"),
        ("gpu_memory_utilization", "inf", "engine.gpu_memory_utilization = inf"),
        ("step_overhead_ms", "1e300", "efficiency.step_overhead_ms = 1e+300"),
        ("layers", '"many"', "model.layers = 'many' is not a whole number"),
        ("top_k", "4", "model.top_k is above experts"),
        (None, None, "nested more than 32 deep"),
    ],
)
def test_a_hostile_profile_is_one_line_and_exit_2(
    tmp_path: Path, key: str | None, value: str, said: str
) -> None:
    text = profile_to_toml(get_profile())
    text = text + DEEP if key is None else _edit(text, key, value)
    path = tmp_path / "hostile.toml"
    path.write_text(text)
    done = run_cli("sim", "--profile", str(path), "--virtual", "--requests", "3")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
