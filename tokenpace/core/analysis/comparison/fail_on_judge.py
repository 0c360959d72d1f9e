"""Absolute gates judged on a run's summary, by intervals. Pure.

Each line (fail_on.py) is judged on the 95 % interval of its figure: it *fails* when the whole
interval lies beyond the line, *passes* when the whole interval lies within it, and is *undecided*
when the interval straddles the line, when the run is too short for the percentile asked (fewer than
5 requests beyond it, or fewer than 5 effective ones where requests moved together: such a line may
still fail, on its interval's lower bound, never pass), or when no interval can be formed. The
intervals are the ones the summary carries: a percentile's order-statistic interval (at the
effective sample size where requests sent close in time moved together: core/stats.py), the asked
percentiles' (``--percentiles``) for other pNN; a side the summary leaves unbounded (None: too few
effective samples beyond the percentile) is infinite, so it never passes and its other bound may
still fail. Formed here:
a mean's, mean +- 1.96 sd / sqrt(n_e) (n_e the smallest effective count the summary gives); the
error rate's, Wilson's score interval over requests sent; a throughput's, the Poisson score interval
of its count over the measurement window (output tokens: the requests' count, scaled by the tokens
a request carried).

The run's verdict: fail when any line fails, else undecided when any is, else pass; the line that
decided is named (the first failing, else the first undecided, else the one closest to its line).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.comparison.fail_on import ERROR_RATE, LATENCIES, FailOnLine
from tokenpace.core.analysis.evidence.rates import wilson, z_for
from tokenpace.core.stats import ci_from_json, enough_samples, samples_needed

PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"
_Z = z_for(0.05)
_RATE_KEYS = {"throughput": "request_throughput", "output_throughput": "output_token_throughput"}


@dataclass(frozen=True, slots=True)
class LineVerdict:
    line: FailOnLine
    outcome: str  # pass | fail | undecided
    value: float | None
    interval: tuple[float, float] | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.line.to_dict(),
            "outcome": self.outcome,
            "value": self.value,
            # a side the run cannot bound: None (JSON has no infinity)
            "ci95": [v if math.isfinite(v) else None for v in self.interval] if self.interval else None,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class FailOnReport:
    items: tuple[LineVerdict, ...]

    @property
    def outcome(self) -> str:
        states = {i.outcome for i in self.items}
        return FAIL if FAIL in states else UNDECIDED if UNDECIDED in states else PASS

    @property
    def decided_by(self) -> LineVerdict | None:
        if not self.items:
            return None
        for state in (FAIL, UNDECIDED):
            for item in self.items:
                if item.outcome == state:
                    return item
        return min(self.items, key=_margin)

    def line(self) -> str:
        """One line: the outcome and the metric that decided it, with its interval."""
        item = self.decided_by
        if item is None:
            return "no line to judge"
        head = {PASS: "PASS", FAIL: "FAIL", UNDECIDED: "UNDECIDED"}[self.outcome]
        return f"{head}: {item.line.name} ({item.line.text}) {item.reason}"

    def to_dict(self) -> dict[str, Any]:
        item = self.decided_by
        return {
            "outcome": self.outcome,
            "decided_by": item.line.name if item else None,
            "line": self.line(),
            "lines": [i.to_dict() for i in self.items],
        }


def judge_fail_on(lines: Sequence[FailOnLine], summary: Mapping[str, Any]) -> FailOnReport:
    """Every line judged on the summary (a result's ``summary``, as ``Summary.to_dict`` writes it)."""
    return FailOnReport(tuple(_judge(line, summary) for line in lines))


def _judge(line: FailOnLine, s: Mapping[str, Any]) -> LineVerdict:
    if line.metric in LATENCIES:
        found = _latency(line, s.get(f"{line.metric}_ms") or {}, s.get("percentiles") or {})
    elif line.metric == ERROR_RATE:
        found = _error_rate(s)
    else:
        found = _rate(line, s)
    if isinstance(found, str):
        return LineVerdict(line, UNDECIDED, None, None, found)
    value, (lo, hi), n, thin = found
    verdict = _decide(line, value, lo, hi)
    if thin:  # its lower bound still holds (a rank of the binomial): it may fail, never pass
        if verdict.outcome == FAIL:
            return verdict
        return LineVerdict(line, UNDECIDED, value, (lo, hi), thin)
    if verdict.outcome != UNDECIDED:
        return verdict
    needs = (
        _needs_share(value, line, n) if line.metric == ERROR_RATE else _needs(value, lo, hi, line.limit, n)
    )
    return LineVerdict(line, UNDECIDED, value, (lo, hi), f"{verdict.reason}: {needs}")


# A figure, its interval, the count its width shrinks with and why the sample is too thin to pass
# it ("" when it is not); or why no interval can be formed.
Found = tuple[float, tuple[float, float], float, str] | str


def _latency(line: FailOnLine, dist: Mapping[str, Any], asked: Mapping[str, Any]) -> Found:
    n = int(dist.get("n") or 0)
    if n == 0:
        return f"no {line.metric.upper()} sample (no successful request carried one)"
    n_effs = dist.get("n_eff") or {}
    if line.stat == "mean":
        mean, sd = dist.get("mean"), dist.get("std")
        if mean is None or sd is None or n < 2:
            return "a mean's interval needs 2 samples or more"
        n_e = min([float(n), *(float(v) for v in n_effs.values())])
        half = _Z * float(sd) / math.sqrt(max(n_e, 1.0))
        return float(mean), (float(mean) - half, float(mean) + half), float(n), ""
    q = line.q
    assert q is not None
    value, ci = dist.get(line.stat), ci_from_json((dist.get("ci95") or {}).get(line.stat))
    if value is None or ci is None:
        value, asked_ci = _asked(asked, line)
        ci = ci_from_json(asked_ci)
    thin = _thin(q, n, float(n_effs.get(line.stat, n)))
    if value is None or ci is None:
        return (
            thin or f"no interval for {line.stat.upper()} in this run (bench --percentiles {q:g} measures it)"
        )
    return float(value), ci, float(n), thin


def _thin(q: float, n: int, n_e: float) -> str:
    """Why a percentile rests on too few samples to pass a line ("" when it does not)."""
    if not enough_samples(n, q):
        return (
            f"too short for P{q:g}: {n} samples, it needs {samples_needed(q)} (5 beyond it): "
            "run more requests, or gate a lower percentile"
        )
    if not enough_samples(n_e, q):
        more = math.ceil(samples_needed(q) * n / max(n_e, 1.0))
        return (
            f"too few effective samples for P{q:g}: {n} requests moved together, worth {n_e:.0f} "
            f"independent ones; about {more} requests would give it 5 beyond it"
        )
    return ""


def _asked(asked: Mapping[str, Any], line: FailOnLine) -> tuple[float | None, Sequence[float | None] | None]:
    for point in (asked.get("metrics") or {}).get(f"{line.metric}_ms") or []:
        if point.get("name") == line.stat:
            return point.get("value"), point.get("ci95")
    return None, None


def _error_rate(s: Mapping[str, Any]) -> Found:
    sent = int((s.get("counts") or {}).get("sent") or 0)
    if sent == 0:
        return "no request was sent"
    rate = float(s.get("error_rate") or 0.0)
    ci = wilson(round(rate * sent), sent)
    assert ci is not None
    return rate, ci, float(sent), ""


def _rate(line: FailOnLine, s: Mapping[str, Any]) -> Found:
    window = float(s.get("window_s") or 0.0)
    ok = int((s.get("counts") or {}).get("ok") or 0)
    value = s.get(_RATE_KEYS.get(line.metric, line.metric))
    if value is None:
        return "no goodput in this run: goodput counts requests that meet --slo lines (give --slo)"
    if window <= 0:
        return "no measurement window (no request ended)"
    per = float(value) * window / ok if line.metric == "output_throughput" and ok else 1.0
    count = float(value) * window / per  # requests: ok ones, or the good ones for goodput
    lo, hi = _poisson(count)
    return float(value), (lo * per / window, hi * per / window), max(count, 1.0), ""


def _poisson(k: float) -> tuple[float, float]:
    """The score interval of a Poisson mean from one count: k + z^2/2 -+ z sqrt(k + z^2/4)."""
    half = _Z * math.sqrt(k + _Z * _Z / 4)
    return max(0.0, k + _Z * _Z / 2 - half), k + _Z * _Z / 2 + half


def _decide(line: FailOnLine, value: float, lo: float, hi: float) -> LineVerdict:
    limit = line.limit
    if line.upper:
        within = hi < limit if line.op == "<" else hi <= limit
        beyond = lo >= limit if line.op == "<" else lo > limit
    else:
        within = lo > limit if line.op == ">" else lo >= limit
        beyond = hi <= limit if line.op == ">" else hi < limit
    shown = f"{_fmt(line, value)} [{_fmt(line, lo)}, {_fmt(line, hi)}]"
    bound = f"{line.op} {_fmt(line, limit)}"
    if beyond:
        return LineVerdict(line, FAIL, value, (lo, hi), f"{shown}: the whole interval misses {bound}")
    if within:
        return LineVerdict(line, PASS, value, (lo, hi), f"{shown}: the whole interval meets {bound}")
    return LineVerdict(line, UNDECIDED, value, (lo, hi), f"{shown} straddles {bound}")


def _needs(value: float, lo: float, hi: float, limit: float, n: float) -> str:
    """About how many samples would decide it, if the estimate stayed where it is (widths shrink as
    one over the square root of the count)."""
    gap = abs(value - limit)
    half = (hi - value) if value < limit else (value - lo)
    if math.isinf(half):
        return "that side of the interval is unbounded: more requests, or a longer run, would bound it"
    if gap == 0 or half <= 0:
        return "the estimate sits on the line: no run length decides it"
    factor = (half / gap) ** 2
    if factor > 100:
        return "the estimate sits too close to the line for a longer run to decide it"
    return f"about {math.ceil(n * factor)} samples would decide it if the estimate held"


def _needs_share(rate: float, line: FailOnLine, n: float) -> str:
    """The requests whose Wilson interval at the same error rate would clear the line (its width
    shrinks as 1/n near 0, not 1/sqrt(n): searched, not scaled)."""
    size = n
    for _ in range(40):  # 1.25^40: about 7,500 times the run
        size *= 1.25
        ci = wilson(round(rate * size), int(size))
        assert ci is not None
        if _decide(line, rate, *ci).outcome != UNDECIDED:
            return f"about {math.ceil(size)} requests would decide it if the rate held"
    return "the rate sits too close to the line for a longer run to decide it"


def _fmt(line: FailOnLine, x: float) -> str:
    if math.isinf(x):
        return "unbounded"
    if line.metric == ERROR_RATE:
        return f"{x:.2%}"
    if line.metric in LATENCIES:
        return f"{x:.4g} ms"
    return f"{x:.4g}/s"


def _margin(item: LineVerdict) -> float:
    """How far the interval's near end lies inside its line, as a share of the line."""
    if item.interval is None or not item.line.limit:
        return math.inf
    near = item.interval[1] if item.line.upper else item.interval[0]
    return abs(item.line.limit - near) / abs(item.line.limit)
