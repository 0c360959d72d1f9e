"""The compiled engine (scripts/build_native.py) and its source compute the same runs, and a compiled
build older than its source is never loaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tokenpace.sim import native

ROOT = Path(__file__).resolve().parents[2]
BUILT = native.built_matches_source()
needs_build = pytest.mark.skipif(not BUILT, reason="no compiled build here (make native)")


def _python(code: str, env: dict[str, str] | None = None, path: Path = ROOT) -> str:
    env = {**os.environ, "PYTHONPATH": str(path), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=path
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_WHICH = "import tokenpace.sim, tokenpace.sim.native as n; print(n.active())"


def test_the_source_build_passes_the_pinned_runs():
    """The pinned digests (tests/sim/virtual_time/test_sim_virtual_pinned.py) are checked in this process with
    whichever build is loaded (the compiled one under `make test`); here again from source."""
    env = {**os.environ, native.ENV: "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/sim/virtual_time/test_sim_virtual_pinned.py",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert _python(_WHICH, {native.ENV: "0"}) == "False"


@needs_build
def test_the_compiled_build_is_loaded_while_it_matches_its_source():
    assert _python(_WHICH) == "True"
    out = _python(
        "import tokenpace.sim.model.engine as e, tokenpace.sim.model.kvcache as k;"
        " print(e.__file__, k.__file__)"
    )
    assert all(not f.endswith(".py") for f in out.split())


@needs_build
def test_an_edited_source_is_loaded_from_source_all_of_the_group(tmp_path: Path):
    """A pull or an edit after the build: the compiled copies would run old code, so every module of
    the group comes from source (a compiled engine cannot call a source KV cache)."""
    shutil.copytree(ROOT / "tokenpace", tmp_path / "tokenpace", ignore=shutil.ignore_patterns("__pycache__"))
    assert _python(_WHICH, path=tmp_path) == "True"
    with (tmp_path / "tokenpace" / "sim" / "model" / "kvcache.py").open("a") as f:
        f.write("\n# edited after the build\n")
    assert _python(_WHICH, path=tmp_path) == "False"
    out = _python("import tokenpace.sim.model.engine as e; print(e.__file__)", path=tmp_path)
    assert out.endswith("engine.py")


@needs_build
def test_the_build_is_skipped_while_up_to_date():
    done = subprocess.run(
        [sys.executable, "scripts/build_native.py"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "up to date" in done.stdout
