"""Which build of the engine's hot modules Python loads: the mypyc-compiled one, or the source.

`scripts/build_native.py` (run by `make run` and `make test`) compiles the modules named here with
mypyc into extension modules in a folder of their own, `_compiled/` (git-ignored, never on the
import path, so no other checkout or commit of these sources can pick them up), with a record of the
SHA-256 of every source the build read: the compiled modules and every tokenpace module they import,
transitively (compiled code type-checks what it reads from them). This module is imported first by
`tokenpace.sim` and, while every recorded source still matches, puts a finder first on the import
path that loads the compiled group from `_compiled/`; otherwise (an edit, a pull, no build, or
``TOKENPACE_SIM_NATIVE=0``) the sources load as usual. All or none: compiled modules call each other
directly, so a compiled engine cannot run against a source KV cache.

Same source, same results: the compiled build runs the same Python, only faster (about 2.4x fewer
instructions per simulated request, see docs/notes/sim-performance.md).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# The virtual clock's hot path, named below `tokenpace.sim`; one mypyc group (they call each other as C).
MODULES = (
    "model.costmodel",
    "model.engine",
    "model.fast_forward",
    "model.kvcache",
    "model.lazy_decode",
    "model.request",
    "model.step_noise",
    "virtual_time.virtual",
    "virtual_time.virtual_load",
    "virtual_time.virtual_stream",
)
PACKAGE = "tokenpace.sim"
GROUP = f"{PACKAGE}._native"  # mypyc's group; its shared library is the module `_native__mypyc`
LIBRARY = "_native__mypyc"
HERE = Path(__file__).parent
SOURCE_ROOT = HERE.parent.parent  # holds the `tokenpace` package; recorded paths are relative to it
BUILD = HERE / "_compiled"
RECORD = "record.json"
ENV = "TOKENPACE_SIM_NATIVE"  # "0": always the source


def source_of(module: str) -> str:
    """The recorded (root-relative) path of one of MODULES' sources."""
    return f"tokenpace/sim/{module.replace('.', '/')}.py"


def built_name(module: str, suffix: str) -> str:
    """Where one of MODULES (or LIBRARY) lies in the build folder, relative to it."""
    return f"{module.replace('.', '/')}{suffix}"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def built_matches_source(build: Path = BUILD, root: Path = SOURCE_ROOT) -> bool:
    """A compiled build for this Python is present, and every source it read is unchanged."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        record = json.loads((build / RECORD).read_text())
        sources = record["sources"]
        if record["suffix"] != suffix or not isinstance(sources, dict):
            return False
        if not all(source_of(m) in sources for m in MODULES):
            return False
        if not all((build / built_name(name, suffix)).is_file() for name in (*MODULES, LIBRARY)):
            return False
        return all(digest(root / rel) == sha for rel, sha in sources.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


class _FromBuild(importlib.abc.MetaPathFinder):
    """Loads the compiled group (its modules and their shared library) from the build folder."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.suffix = importlib.machinery.EXTENSION_SUFFIXES[0]

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(PACKAGE + "."):
            return None
        name = fullname[len(PACKAGE) + 1 :]
        if name not in MODULES and name != LIBRARY:
            return None
        so = str(self.build / built_name(name, self.suffix))
        loader = importlib.machinery.ExtensionFileLoader(fullname, so)
        return importlib.util.spec_from_file_location(fullname, so, loader=loader)


def _choose() -> bool:
    if os.environ.get(ENV, "1") == "0" or not built_matches_source():
        return False
    if not any(isinstance(f, _FromBuild) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromBuild(BUILD))
    return True


COMPILED_WANTED = _choose()


def active() -> bool:
    """Whether the engine running in this process is the compiled build."""
    engine = sys.modules.get(f"{PACKAGE}.model.engine")
    return engine is not None and not str(getattr(engine, "__file__", "")).endswith(".py")
