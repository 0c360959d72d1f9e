"""Tests that patch the engine's methods: the compiled build (tokenpace/sim/native.py) calls them
directly, so a patch on the class would be ignored and the test would compare a run with itself.
They are skipped in a compiled process and run from source by tests/sim/test_native.py."""

from __future__ import annotations

import pytest

import tokenpace.sim  # noqa: F401  (loads the engine, compiled or not)
from tokenpace.sim import native

SOURCE_ONLY = pytest.mark.skipif(
    native.active(),
    reason="patches Engine methods, which the compiled build calls directly (run from source by test_native)",
)
