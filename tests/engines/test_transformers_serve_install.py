"""scripts/install-transformers-serve.sh: the cached venv's python at once, keyed by the pinned
versions; a clear exit status 3 when it cannot be installed here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from engines.engines_support import MISSING_TOOLS, TRANSFORMERS_SERVE_SCRIPT

PINS = {"TRANSFORMERS_SERVE_VERSION": "9.9.9", "TRANSFORMERS_SERVE_TORCH": "8.8.8"}


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(TRANSFORMERS_SERVE_SCRIPT)], capture_output=True, text=True, env=env, timeout=60
    )


def test_cached_venv_is_reported_without_installing(tmp_path: Path) -> None:
    venv = tmp_path / "cache" / "transformers-serve-transformers-9.9.9-torch-8.8.8"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (venv / ".installed").write_text("transformers-9.9.9-torch-8.8.8\n")
    done = _run({**os.environ, "TOKENPACE_CACHE": str(tmp_path / "cache"), **PINS})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(python)


def test_other_pins_are_another_cache_entry(tmp_path: Path) -> None:
    """A venv made for other versions is not taken for these: without a python that can make a
    venv, the script says it cannot install (exit 3) rather than print the other one."""
    other = tmp_path / "cache" / "transformers-serve-transformers-1.0.0-torch-8.8.8"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").write_text("#!/bin/sh\n")
    (other / ".installed").write_text("x\n")
    env = {**os.environ, "TOKENPACE_CACHE": str(tmp_path / "cache"), "PYTHON": "false", **PINS}
    done = _run(env)
    assert done.returncode == MISSING_TOOLS
    assert done.stdout == ""


def test_no_usable_python_exits_3_with_a_reason(tmp_path: Path) -> None:
    env = {**os.environ, "TOKENPACE_CACHE": str(tmp_path / "cache"), "PYTHON": str(tmp_path / "nopython")}
    done = _run(env)
    assert done.returncode == MISSING_TOOLS
    assert "cannot install transformers serve" in done.stderr and "venv" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "cache").exists()  # nothing half-made left behind
