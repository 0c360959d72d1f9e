"""Selecting runs: ``key=value`` filters over labels, columns and (dotted) condition fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenpace.adapters.store.protocol import RunInfo
from tokenpace.adapters.store.url import StoreError
from tokenpace.core.analysis.comparison.conditions import get_path

COLUMN_KEYS = ("model", "endpoint", "kind")


def matches(info: RunInfo, where: Mapping[str, str]) -> bool:
    """A run matches ``key=value`` when a label, a column or a (dotted) condition field equals it."""
    for key, want in where.items():
        if key in info.labels:
            if info.labels[key] != want:
                return False
            continue
        got = getattr(info, key) if key in COLUMN_KEYS else get_path(info.conditions, key)
        if text_of(got) != want.lower():
            return False
    return True


def text_of(value: Any) -> str | None:
    """A stored value as ``key=value`` filters compare it (None for none)."""
    if value is None:
        return None
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower()


def parse_where(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StoreError(
                f"{item!r}: expected KEY=VALUE: a label, model, endpoint or condition (load.rate=2)"
            )
        out[key.strip()] = value.strip()
    return out
