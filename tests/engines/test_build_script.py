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


def _fake_tool(bin_dir: Path, name: str, body: str) -> None:
    tool = bin_dir / name
    tool.write_text("#!/bin/bash\n" + body + "\n")
    tool.chmod(0o755)


def test_a_build_says_its_steps_how_long_they_take_and_shows_the_compilers_progress(tmp_path: Path) -> None:
    bin_dir, cache = tmp_path / "bin", tmp_path / "cache"
    bin_dir.mkdir()
    sdist_dir = cache / "sdist"
    (tmp_path / "src" / "llama_cpp_python-9.9.8" / "vendor" / "llama.cpp").mkdir(parents=True)
    sdist_dir.mkdir(parents=True)
    subprocess.run(["tar", "-czf", str(sdist_dir / "llama_cpp_python-9.9.8.tar.gz"), "-C",
                    str(tmp_path / "src"), "llama_cpp_python-9.9.8"], check=True)  # fmt: skip
    # cmake: configure does nothing; --build prints progress and leaves a binary where the real one goes
    cmake = (
        '[ "$1" = --build ] || exit 0\nmkdir -p "$2/bin"\n'
        'for p in 25 50 100; do echo "[ $p%] Building CXX object step$p.o"; echo "noise $p"; done\n'
        'printf "#!/bin/sh\\necho version 1\\n" > "$2/bin/llama-server"\nchmod +x "$2/bin/llama-server"'
    )
    _fake_tool(bin_dir, "cmake", cmake)
    for name in ("c++", "cc"):
        _fake_tool(bin_dir, name, "exit 0")
    _fake_tool(bin_dir, "python-fake", "exit 0")  # `-m pip --version` succeeds; the sdist is cached
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TOKENPACE_CACHE": str(cache),
           "LLAMA_CPP_PYTHON_VERSION": "9.9.8", "PYTHON": str(bin_dir / "python-fake")}  # fmt: skip
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cache / "llama-server-9.9.8" / "llama-server")
    assert "step 3/3: compiling" in done.stderr and "10-18 minutes" in done.stderr
    assert "[ 50%] Building CXX object step50.o" in done.stderr  # the compiler's progress, on screen
    assert "noise" not in done.stderr  # the rest goes to the log only
    assert "noise 50" in (cache / "build-llama-server-9.9.8.log").read_text()


def test_compile_progress_lines_carry_an_eta_and_noise_is_dropped() -> None:
    lines = "[ 10%] Building a.o\nnoise\n[ 50%] Building b.o\n[3/4] Linking\n[100%] Built target\n"
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--progress-filter"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
    )
    out = done.stdout.splitlines()
    assert done.returncode == 0 and len(out) == 4 and not any("noise" in line for line in out)
    assert all("so far, ETA " in line for line in out[:3])  # make's % and ninja's N/M both
    assert out[3].startswith("[100%] Built target") and "ETA" not in out[3]
