"""Absolute gates: ``--fail-on "ttft.p95<500ms,tpot.p99<60ms,error_rate<1%"`` parsed. Pure.

A line names a metric as the run's summary does (``ttft``, ``tpot``, ``itl``, ``e2e`` with ``pNN``
or ``mean``; ``error_rate``; ``throughput``, ``output_throughput``, ``goodput``), a direction and a
limit with its unit. Latencies and the error rate are upper lines (``<``, ``<=``), throughputs lower
ones (``>``, ``>=``): the other direction would gate on the server being slow, and is refused.
Units: ms or s for latencies, % for the error rate, an optional /s for throughputs (req/s;
tok/s, output tokens a second, for ``output_throughput``). The judging is fail_on_judge.py's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

LATENCIES = ("ttft", "tpot", "itl", "e2e")
RATES = ("throughput", "output_throughput", "goodput")
ERROR_RATE = "error_rate"
MAX_LINES = 16  # lines one --fail-on may hold (each is a row people read)

UPPER, LOWER = ("<", "<="), (">", ">=")

_LINE = re.compile(
    r"^(?P<name>[a-z_][a-z0-9_]*)(?:\.(?P<stat>p\d+(?:\.\d+)?|mean))?\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[a-z%/]*)$"
)
_EXAMPLE = "e.g. ttft.p95<500ms,tpot.p99<60ms,error_rate<1%,throughput>20/s"


@dataclass(frozen=True, slots=True)
class FailOnLine:
    metric: str  # ttft | tpot | itl | e2e | error_rate | throughput | output_throughput | goodput
    stat: str  # pNN or mean for a latency; "" for a rate
    op: str  # < <= > >=
    limit: float  # ms for a latency, a share (0-1) for the error rate, per second for a throughput
    text: str  # the line as written

    @property
    def name(self) -> str:
        return f"{self.metric}.{self.stat}" if self.stat else self.metric

    @property
    def q(self) -> float | None:
        """The percentile (0-100) a pNN line asks for; None for a mean or a rate."""
        return float(self.stat[1:]) if self.stat.startswith("p") else None

    @property
    def upper(self) -> bool:
        return self.op in UPPER

    def to_dict(self) -> dict[str, object]:
        return {"line": self.text, "metric": self.name, "op": self.op, "limit": self.limit}


def parse_fail_on(text: str, flag: str = "--fail-on") -> tuple[FailOnLine, ...]:
    """``"ttft.p95<500ms,error_rate<1%"`` -> lines; ValueError with one line for the user."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"{flag} {text!r}: give at least one line, {_EXAMPLE}")
    if len(parts) > MAX_LINES:
        raise ValueError(f"{flag}: at most {MAX_LINES} lines")
    lines = tuple(_line(p.lower(), flag) for p in parts)
    seen: set[str] = set()
    for line in lines:
        if line.name in seen:
            raise ValueError(f"{flag}: {line.name} is given twice")
        seen.add(line.name)
    return lines


def _line(part: str, flag: str) -> FailOnLine:
    m = _LINE.match(part.replace(" ", ""))
    if not m:
        raise ValueError(f"{flag} {part!r}: expected METRIC<LIMIT, {_EXAMPLE}")
    name, stat, op, unit = m["name"], m["stat"] or "", m["op"], m["unit"]
    number = float(m["num"])
    if not math.isfinite(number):
        raise ValueError(f"{flag} {part!r}: the limit must be a finite number")
    if name not in (*LATENCIES, ERROR_RATE, *RATES):
        known = ", ".join((*LATENCIES, ERROR_RATE, *RATES))
        raise ValueError(f"{flag} {part!r}: unknown metric {name!r} (metrics: {known})")
    if name in LATENCIES:
        figure = _stat(part, name, stat, flag)
        return FailOnLine(name, figure, _op(part, op, UPPER, flag), _ms(part, number, unit, flag), part)
    if stat:
        raise ValueError(f"{flag} {part!r}: only latencies (ttft, tpot, itl, e2e) take .pNN or .mean")
    if name == ERROR_RATE:
        if unit != "%":
            raise ValueError(f"{flag} {part!r}: give the error rate in %, e.g. error_rate<1%")
        if number > 100:
            raise ValueError(f"{flag} {part!r}: an error rate is at most 100%")
        return FailOnLine(name, "", _op(part, op, UPPER, flag), number / 100, part)
    per = "tok/s" if name == "output_throughput" else "req/s"
    if unit not in ("", "/s", per):
        raise ValueError(f"{flag} {part!r}: {name} is in {per}: e.g. {name}>{m['num']} or {m['num']}/s")
    return FailOnLine(name, "", _op(part, op, LOWER, flag), number, part)


def _stat(part: str, name: str, stat: str, flag: str) -> str:
    if not stat:
        raise ValueError(f"{flag} {part!r}: say which figure, e.g. {name}.p95 or {name}.mean")
    if stat.startswith("p") and not 0 < float(stat[1:]) < 100:
        raise ValueError(f"{flag} {part!r}: a percentile lies strictly between 0 and 100")
    return stat


def _op(part: str, op: str, allowed: tuple[str, str], flag: str) -> str:
    if op not in allowed:
        kind = "an upper line: use < or <=" if allowed == UPPER else "a lower line: use > or >="
        raise ValueError(f"{flag} {part!r}: this metric takes {kind}")
    return op


def _ms(part: str, number: float, unit: str, flag: str) -> float:
    scale = {"ms": 1.0, "s": 1000.0}.get(unit)
    if scale is None:
        raise ValueError(f"{flag} {part!r}: give a latency in ms or s, e.g. 500ms or 0.5s")
    return number * scale
