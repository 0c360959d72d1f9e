"""Which build of the engine's hot modules Python loads: the mypyc-compiled one, or the source.

`scripts/build_native.py` (run by `make run` and `make test`) compiles the modules named here with
mypyc into extension modules beside their sources, and records each source's SHA-256 in
`_native.json`. An extension module wins over its `.py` in Python's import order, so a compiled copy
left behind by a source that changed since (a pull, an edit) would run old code silently. This module
is imported first by `tokenpace.sim` and loads the compiled group only if every source still matches
the record; otherwise, or with ``TOKENPACE_SIM_NATIVE=0``, it puts a finder first on the import path
that loads all of them from source. All or none: compiled modules call each other directly, so a
compiled engine cannot run against a source KV cache.

Same source, same results: the compiled build runs the same Python, only faster (about 1.6x-2x fewer
instructions per simulated request, see docs/sim.md).
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

# The virtual clock's hot path; one mypyc group (they call each other as C).
MODULES = (
    "costmodel",
    "engine",
    "fast_forward",
    "kvcache",
    "lazy_decode",
    "request",
    "step_noise",
    "virtual",
    "virtual_load",
    "virtual_stream",
)
PACKAGE = "tokenpace.sim"
GROUP = f"{PACKAGE}._native"  # the shared library: tokenpace/sim/_native__mypyc.*.so
HERE = Path(__file__).parent
RECORD = HERE / "_native.json"
ENV = "TOKENPACE_SIM_NATIVE"  # "0": always the source


def source_digests(directory: Path = HERE) -> dict[str, str]:
    """SHA-256 of each compiled module's source, as the build records it."""
    return {m: hashlib.sha256((directory / f"{m}.py").read_bytes()).hexdigest() for m in MODULES}


def built_matches_source(directory: Path = HERE) -> bool:
    """A compiled build is present for this Python, and was built from exactly these sources."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        record = json.loads((directory / RECORD.name).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict) or record.get("suffix") != suffix:
        return False
    if not all((directory / f"{m}{suffix}").is_file() for m in MODULES):
        return False
    return bool(record.get("sources") == source_digests(directory))


class _FromSource(importlib.abc.MetaPathFinder):
    """Loads the compiled group's modules from their `.py` files, ahead of any extension module."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, HERE / f"{name}.py")


def _choose() -> bool:
    if os.environ.get(ENV, "1") != "0" and built_matches_source():
        return True
    if not any(isinstance(f, _FromSource) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromSource())
    return False


COMPILED_WANTED = _choose()


def active() -> bool:
    """Whether the engine running in this process is the compiled build."""
    engine = sys.modules.get(f"{PACKAGE}.engine")
    return engine is not None and not str(getattr(engine, "__file__", "")).endswith(".py")
