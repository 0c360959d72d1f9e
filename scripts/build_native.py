"""Compile the simulator's virtual-clock hot path with mypyc (in place; skipped when up to date).

    python scripts/build_native.py [--force]

Compiles `tokenpace.sim.native.MODULES` as one mypyc group into extension modules beside their
sources (`tokenpace/sim/*.so`, git-ignored) and records the sources' SHA-256 in
`tokenpace/sim/_native.json`; `tokenpace.sim.native` loads the compiled build only while that record
matches the sources, so an edit or a pull never runs stale code. Runs in a temporary directory (so
no project configuration is read by setuptools), then copies the results in. Exit 0: built or up to
date; 3: no C compiler, Python headers or mypyc here (the engine stays pure Python, same results,
slower); 1: the build failed.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "tokenpace" / "sim"
NO_COMPILER = 3


def _native() -> object:
    # The module list and digests live with the loader that checks them; import it by path, so that
    # building never imports the package (whose stale extension modules it is about to replace).
    spec = importlib.util.spec_from_file_location("_tokenpace_native", SIM / "native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_tokenpace_native"] = module
    spec.loader.exec_module(module)
    return module


_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
setup(
    name="tokenpace-sim-native",
    ext_modules=mypycify(sys.argv[1:], opt_level="3", group_name={group!r}),
    script_args=["build_ext", "--build-lib", "out", "--build-temp", "tmp"],
)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even when the record matches")
    args = ap.parse_args()
    native = _native()
    if not args.force and native.built_matches_source(SIM):  # type: ignore[attr-defined]
        print("tokenpace sim: compiled engine up to date")
        return 0
    missing = _missing_toolchain()
    if missing:
        print(f"tokenpace sim: {missing}: the engine stays pure Python (same results, slower)")
        return NO_COMPILER
    modules = native.MODULES  # type: ignore[attr-defined]
    digests = native.source_digests(SIM)  # type: ignore[attr-defined]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    with tempfile.TemporaryDirectory(prefix="tokenpace-native-") as tmp:
        setup = Path(tmp) / "setup_native.py"
        setup.write_text(_SETUP.format(group=native.GROUP))  # type: ignore[attr-defined]
        # Copies of the sources under their package path, so mypyc names the modules right and
        # builds from exactly the bytes whose digests are recorded.
        shutil.copytree(
            ROOT / "tokenpace",
            Path(tmp) / "src" / "tokenpace",
            ignore=shutil.ignore_patterns("*.so", "__pycache__", "_native.json"),
        )
        sources = [f"src/tokenpace/sim/{m}.py" for m in modules]
        print(f"tokenpace sim: compiling {len(modules)} modules with mypyc (about a minute) ...")
        env = dict(os.environ, MYPYPATH=str(Path(tmp) / "src"))
        done = subprocess.run(
            [sys.executable, str(setup), *sources], cwd=tmp, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            print("tokenpace sim: mypyc build failed (the engine stays pure Python)", file=sys.stderr)
            return 1
        built = list((Path(tmp) / "out").rglob(f"*{suffix}"))
        _install(built, Path(tmp) / "out", suffix)
    (SIM / "_native.json").write_text(json.dumps({"suffix": suffix, "sources": digests}, indent=1) + "\n")
    print(f"tokenpace sim: compiled engine built ({len(built)} extension modules)")
    return 0


def _missing_toolchain() -> str:
    if shutil.which(os.environ.get("CC", "cc")) is None:
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (python3-dev)"
    for module in ("mypyc", "setuptools"):
        if importlib.util.find_spec(module) is None:
            return f"no {module} in this Python"
    return ""


def _install(built: list[Path], out: Path, suffix: str) -> None:
    (SIM / "_native.json").unlink(missing_ok=True)  # no record while the files are half replaced
    for old in SIM.glob(f"*{suffix}"):
        old.unlink()
    for so in built:
        rel = so.relative_to(out)
        if rel.parts[:2] != ("tokenpace", "sim"):
            raise SystemExit(f"unexpected build output {rel}")
        shutil.copy2(so, SIM / rel.name)


if __name__ == "__main__":
    raise SystemExit(main())
