"""scripts/build-llama-server.sh: cached path at once; a clear exit status 3 without build tools."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from engines.engines_support import BUILD_SCRIPT, MISSING_TOOLS


def test_missing_build_tools_exit_3_with_a_reason(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with a shell and coreutils but no cmake or compiler
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "cat", "mkdir", "rm", "tar", "flock", "date", "tail"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "TOKENPACE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(bin_dir / "bash"), str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == MISSING_TOOLS
    assert "missing: cmake" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "cache").exists()  # nothing half-built left behind


def test_cached_binary_is_reported_without_building(tmp_path: Path) -> None:
    cached = tmp_path / "cache" / "llama-server-9.9.9" / "llama-server"
    cached.parent.mkdir(parents=True)
    cached.write_text("#!/bin/sh\n")
    cached.chmod(0o755)
    env = {**os.environ, "TOKENPACE_CACHE": str(tmp_path / "cache"), "LLAMA_CPP_PYTHON_VERSION": "9.9.9"}
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0
    assert done.stdout.strip() == str(cached)
