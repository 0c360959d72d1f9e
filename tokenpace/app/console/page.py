"""What a console page is made of (``Page``), what it may read of a request (``Ask``, bounded), the
reads it may reuse between requests (``Kept``, bounded), and the two ways it refuses (``BadAsk``:
400, ``NotFound``: 404)."""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

import plotly.graph_objects as go

from tokenpace.adapters.store import Store

TEXT_MAX = 1000  # characters of one query parameter
VALUES_MAX = 20  # values of one repeated query parameter (label=..., cond=...)
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|h|d|w)$")
_UNIT_S = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
T = TypeVar("T")


class BadAsk(ValueError):
    """A filter the page cannot take: one line for the user (400)."""


class NotFound(LookupError):
    """No such run, group or test in the store (404)."""


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    figure: go.Figure


class Kept:
    """Reads a console's pages reuse between requests (one store's: a gateway session's traffic,
    read once for every guard tried): at most ``most``, holding ``size_max`` in all (in the unit the
    reader's ``size`` counts; a larger read is not kept), each for ``ttl_s`` at most. Thread-safe: two
    requests may both read what is missing (the later one is kept)."""

    def __init__(self, most: int, size_max: int, ttl_s: float) -> None:
        self.most, self.size_max, self.ttl_s = most, size_max, ttl_s
        self._reads: OrderedDict[Hashable, tuple[float, int, object]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, read: Callable[[], T], size: Callable[[T], int]) -> T:
        """The read kept under ``key`` (``key`` says all it depends on), else ``read()``, kept."""
        now = time.monotonic()
        with self._lock:
            hit = self._reads.get(key)
            if hit is not None and now - hit[0] < self.ttl_s:
                self._reads.move_to_end(key)
                return cast(T, hit[2])
        value = read()
        n = size(value)
        with self._lock:
            self._reads.pop(key, None)
            if n <= self.size_max:
                self._reads[key] = (now, n, value)
                while len(self._reads) > self.most or sum(r[1] for r in self._reads.values()) > self.size_max:
                    self._reads.popitem(last=False)
        return value

    def held(self) -> int:
        """The size held in all (what ``size_max`` bounds)."""
        with self._lock:
            return sum(r[1] for r in self._reads.values())


class Ask:
    """A request's path parameters and query string, read within their bounds; ``kept``: the
    console's reads a page may reuse (None: the page reads afresh, as offline reports do)."""

    def __init__(
        self,
        query: Mapping[str, str] | Sequence[tuple[str, str]],
        match: Mapping[str, str],
        kept: Kept | None = None,
    ):
        self._items = list(query.items()) if isinstance(query, Mapping) else list(query)
        self._match = dict(match)
        self.kept = kept

    def keeping(self, kept: Kept) -> Ask:
        """The same request, its page reusing ``kept``'s reads."""
        return Ask(self._items, self._match, kept)

    def key(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """What the page's answer depends on, for a cache."""
        return tuple(sorted(self._match.items())), tuple(self._items)

    def path(self, name: str) -> str:
        return _bounded(name, self._match.get(name, ""))

    def all(self, name: str) -> list[str]:
        values = [_bounded(name, v) for k, v in self._items if k == name and v.strip()]
        if len(values) > VALUES_MAX:
            raise BadAsk(f"{name}: at most {VALUES_MAX} values")
        return values

    def text(self, name: str, default: str = "") -> str:
        values = self.all(name)
        return values[-1].strip() if values else default

    def number(self, name: str, default: int, lo: int, hi: int) -> int:
        raw = self.text(name)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadAsk(f"{name}: expected a whole number, got {raw[:40]!r}") from None
        if not lo <= value <= hi:
            raise BadAsk(f"{name}: {value} is outside {lo}..{hi}")
        return value

    def when(self, name: str) -> float | None:
        """``7d`` / ``12h`` / ``30m`` / ``2w`` ago, or an ISO date or time (UTC unless it says)."""
        raw = self.text(name)
        if not raw:
            return None
        m = _RELATIVE.match(raw)
        if m:
            return time.time() - float(m.group(1)) * _UNIT_S[m.group(2)]
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            raise BadAsk(f"{name}: {raw[:40]!r} is not a time: use e.g. 7d, 12h, 2026-05-01") from None
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()

    def relative(self, name: str) -> bool:
        """The time asked under ``name`` is relative (``7d``): it moves with the clock."""
        return _RELATIVE.match(self.text(name)) is not None

    def pairs(self, name: str) -> dict[str, str]:
        """``name=KEY=VALUE`` parameters as a mapping."""
        out = {}
        for item in self.all(name):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise BadAsk(f"{name}: expected KEY=VALUE, got {item[:60]!r}")
            out[key.strip()] = value.strip()
        return out

    def query(self, **changed: str | list[str] | None) -> list[tuple[str, str]]:
        """This request's query with some parameters replaced (None: removed), for links."""
        out = [(k, v) for k, v in self._items if k not in changed]
        for key, value in changed.items():
            if isinstance(value, list):
                out += [(key, v) for v in value]
            elif value is not None:
                out.append((key, value))
        return out


def _bounded(name: str, value: str) -> str:
    if len(value) > TEXT_MAX:
        raise BadAsk(f"{name}: at most {TEXT_MAX} characters")
    return value


DataFn = Callable[[Store, Ask], dict[str, Any]]
ChartsFn = Callable[[dict[str, Any]], list[Chart]]
StampFn = Callable[[Store, Ask], Any]


def no_charts(data: dict[str, Any]) -> list[Chart]:
    return []


@dataclass(frozen=True, slots=True)
class Page:
    """``GET path`` renders ``template`` with ``data(store, ask)`` and ``charts(data)``; ``GET
    /api`` + ``path`` answers ``data(store, ask)`` as JSON. ``title`` names it in the menu ("" keeps
    it out: a page reached by a link, such as one run). ``cached``: answers are kept (a few, until the
    store gains or loses a run) for a page whose statistics take seconds; ``stamp(store, ask)``: what
    else a kept answer depends on (a live gateway session's records), asked before each answer."""

    name: str
    path: str
    template: str
    data: DataFn
    title: str = ""
    charts: ChartsFn = field(default=no_charts)
    cached: bool = False
    stamp: StampFn | None = None
