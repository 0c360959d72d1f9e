"""Compile the simulator's virtual-clock hot path with mypyc (skipped when up to date).

    python scripts/build_native.py [--force]

Compiles `tokenpace.sim.native.MODULES` as one mypyc group into extension modules in
`tokenpace/sim/_compiled/` (git-ignored, not on the import path), with `record.json`: the SHA-256 of
every source the build read (those modules and every tokenpace module they import, transitively).
`tokenpace.sim.native` loads the compiled build only while that record matches, so an edit or a pull
never runs stale code. Builds from copies in a temporary directory (no project configuration is
read by setuptools; the record is of the bytes compiled), then swaps the folder in. Exit 0: built
or up to date; 3: no C compiler, Python headers or mypyc here (the engine stays pure Python, same
results, slower); 1: the build failed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "tokenpace" / "sim"
NO_TOOLCHAIN = 3


def _native() -> ModuleType:
    # The module list and the record's check live with the loader that uses them; import it by path,
    # so that building never imports the package (nor a build it is about to replace).
    spec = importlib.util.spec_from_file_location("_tokenpace_native", SIM / "native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_tokenpace_native"] = module
    spec.loader.exec_module(module)
    return module


def import_closure(root: Path, modules: list[str]) -> list[str]:
    """Paths (relative to root) of these modules and every tokenpace module they import, transitively,
    with the packages' __init__ files on the way."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        rel = _module_file(root, todo.pop())
        if rel is None or rel in seen:
            continue
        seen.add(rel)
        parts = Path(rel).parent.parts
        for i in range(1, len(parts) + 1):  # the packages it is in run first
            init = Path(*parts[:i], "__init__.py").as_posix()
            if init not in seen:
                todo.append(".".join(parts[:i]))
        todo.extend(_imports(root / rel, ".".join(Path(rel).with_suffix("").parts)))
    return sorted(seen)


def _module_file(root: Path, name: str) -> str | None:
    base = Path(*name.split("."))
    for rel in (base.with_suffix(".py"), base / "__init__.py"):
        if (root / rel).is_file():
            return rel.as_posix()
    return None


def _imports(path: Path, module: str) -> list[str]:
    out: list[str] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.append(base)
            out += [f"{base}.{a.name}" for a in node.names]  # `from package import module`
    return [m for m in out if m == "tokenpace" or m.startswith("tokenpace.")]


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
    _remove_strays()
    if not args.force and native.built_matches_source(native.BUILD, ROOT):
        print("tokenpace sim: compiled engine up to date")
        return 0
    missing = _missing_toolchain()
    if missing:
        print(f"tokenpace sim: {missing}: the engine stays pure Python (same results, slower)")
        return NO_TOOLCHAIN
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    with tempfile.TemporaryDirectory(prefix="tokenpace-native-") as tmp:
        src = Path(tmp) / "src"
        ignore = shutil.ignore_patterns("*.so", "__pycache__", "_compiled")
        shutil.copytree(ROOT / "tokenpace", src / "tokenpace", ignore=ignore)
        closure = import_closure(src, [f"{native.PACKAGE}.{m}" for m in native.MODULES])
        sources = {rel: native.digest(src / rel) for rel in closure}
        (Path(tmp) / "setup_native.py").write_text(_SETUP.format(group=native.GROUP))
        print(f"tokenpace sim: compiling {len(native.MODULES)} modules with mypyc (about a minute) ...")
        done = subprocess.run(
            # an extra's package may be absent (a core install): mypy need not see it to compile these
            [sys.executable, "setup_native.py", "--ignore-missing-imports"]
            + [f"src/{native.source_of(m)}" for m in native.MODULES],
            cwd=tmp,
            env=dict(os.environ, MYPYPATH=str(src)),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            print("tokenpace sim: mypyc build failed (the engine stays pure Python)", file=sys.stderr)
            return 1
        staged = Path(tmp) / "_compiled"
        staged.mkdir()
        built = Path(tmp) / "out" / "tokenpace" / "sim"
        for name in (*native.MODULES, native.LIBRARY):  # each where the finder looks for it
            target = staged / native.built_name(name, suffix)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built / native.built_name(name, suffix), target)
        record = {"suffix": suffix, "sources": sources}
        (staged / native.RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        shutil.rmtree(native.BUILD, ignore_errors=True)
        # the record last: until it is there, the folder does not match and the source is loaded
        shutil.copytree(staged, native.BUILD, ignore=shutil.ignore_patterns(native.RECORD))
        shutil.copy2(staged / native.RECORD, native.BUILD / native.RECORD)
    print(f"tokenpace sim: compiled engine built ({len(closure)} sources recorded)")
    return 0


def _missing_toolchain() -> str:
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        return f"no C compiler ({cc[0] if cc else 'none configured'})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (python3-dev)"
    for module in ("mypyc", "setuptools"):
        if importlib.util.find_spec(module) is None:
            return f"no {module} in this Python"
    return ""


def _remove_strays() -> None:
    """Extension modules beside the sources (an earlier layout) would outrank them: removed."""
    rooms = [p for p in SIM.glob("*/*.so") if p.parent.name != "_compiled"]  # beside the moved sources
    for stray in [*SIM.glob("*.so"), *rooms, SIM / "_native.json"]:
        stray.unlink(missing_ok=True)


if __name__ == "__main__":
    raise SystemExit(main())
