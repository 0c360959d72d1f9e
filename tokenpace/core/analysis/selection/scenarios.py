"""Scenarios: a use case's workload and its tolerance lines (SLOs), parsed from a plain mapping.

Pure: the mapping comes from a TOML file read by ``tokenpace.adapters.scenario_files``. A scenario
is a workload (input and output tokens, an arrival rate or a concurrency) plus SLO lines, each a
metric, a percentile and a threshold in milliseconds, and optionally the share of requests that
must meet every line (attainment). Prices (API per million tokens, or hardware per hour) may be
given per candidate or model name, to cost candidates; they are never fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SLO_METRICS = ("ttft", "tpot", "itl", "e2e")
SLO_PERCENTILES = ("p50", "p90", "p95", "p99")
DEFAULT_MAX_ERROR_RATE = 0.01


class ScenarioError(ValueError):
    """A scenario file or a price that cannot be used, said in one line."""


@dataclass(frozen=True, slots=True)
class SloLine:
    metric: str  # ttft | tpot | itl | e2e
    percentile: str  # p50 | p90 | p95 | p99
    threshold_ms: float

    @property
    def key(self) -> str:
        """The summary's metric key, e.g. ``ttft_ms``."""
        return f"{self.metric}_ms"

    def label(self) -> str:
        return f"{self.metric.upper()} {self.percentile.upper()} < {self.threshold_ms:g} ms"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "percentile": self.percentile, "threshold_ms": self.threshold_ms}


@dataclass(frozen=True, slots=True)
class Prices:
    """What a candidate costs: per million input/output tokens (an API), or per hour (hardware)."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    hourly: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "input_per_mtok": self.input_per_mtok,
            "output_per_mtok": self.output_per_mtok,
            "hourly": self.hourly,
        }


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    input_len: int
    output_len: int
    rate: float | None  # requests/s (open loop), or
    concurrency: int | None  # users in flight (closed loop)
    slos: tuple[SloLine, ...]
    attainment: float | None = None  # share of requests that must meet every line
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE

    def load_label(self) -> str:
        if self.rate is not None:
            return f"{self.rate:g} req/s"
        return f"concurrency {self.concurrency}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "rate": self.rate,
            "concurrency": self.concurrency,
            "slo": [s.to_dict() for s in self.slos],
            "attainment": self.attainment,
            "max_error_rate": self.max_error_rate,
        }


@dataclass(frozen=True, slots=True)
class ScenarioBook:
    """Scenarios by name, and prices by candidate or model name."""

    scenarios: dict[str, Scenario] = field(default_factory=dict)
    prices: dict[str, Prices] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # scenario name -> where it came from

    def merged(self, other: ScenarioBook) -> ScenarioBook:
        """This book with ``other``'s scenarios and prices added; ``other`` wins a shared name."""
        return ScenarioBook(
            {**self.scenarios, **other.scenarios},
            {**self.prices, **other.prices},
            {**self.sources, **other.sources},
        )


def _number(value: Any, what: str, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{what} must be a number, not {value!r}")
    if positive and value <= 0:
        raise ScenarioError(f"{what} must be positive, not {value!r}")
    return float(value)


def _slo_line(item: Any, where: str) -> SloLine:
    if not isinstance(item, Mapping):
        raise ScenarioError(f"{where}: each slo is a table {{metric, percentile, threshold_ms}}")
    unknown = set(item) - {"metric", "percentile", "threshold_ms"}
    if unknown:
        raise ScenarioError(f"{where}: unknown slo key(s) {', '.join(sorted(unknown))}")
    metric = str(item.get("metric", "")).lower()
    if metric not in SLO_METRICS:
        raise ScenarioError(f"{where}: slo metric must be one of {', '.join(SLO_METRICS)}, not {metric!r}")
    pct = str(item.get("percentile", "p95")).lower()
    if pct not in SLO_PERCENTILES:
        raise ScenarioError(f"{where}: percentile must be one of {', '.join(SLO_PERCENTILES)}, not {pct!r}")
    return SloLine(metric, pct, _number(item.get("threshold_ms"), f"{where}: threshold_ms"))


_SCENARIO_KEYS = {
    "description", "input_len", "output_len", "rate", "concurrency", "slo", "attainment", "max_error_rate",
}  # fmt: skip


def parse_scenario(name: str, body: Any) -> Scenario:
    where = f"scenario {name!r}"
    if not isinstance(body, Mapping):
        raise ScenarioError(f"{where} must be a table")
    unknown = set(body) - _SCENARIO_KEYS
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    rate, conc = body.get("rate"), body.get("concurrency")
    if (rate is None) == (conc is None):
        raise ScenarioError(f"{where}: give exactly one of rate (req/s) or concurrency")
    if conc is not None and (isinstance(conc, bool) or not isinstance(conc, int) or conc < 1):
        raise ScenarioError(f"{where}: concurrency must be a whole number of at least 1")
    slos = body.get("slo")
    if not isinstance(slos, list) or not slos:
        raise ScenarioError(f"{where}: needs at least one slo line")
    attainment = body.get("attainment")
    if attainment is not None and not 0 < _number(attainment, f"{where}: attainment") <= 1:
        raise ScenarioError(f"{where}: attainment is a share of requests, above 0 and at most 1")
    max_err = _number(body.get("max_error_rate", DEFAULT_MAX_ERROR_RATE), f"{where}: max_error_rate", False)
    if not 0 <= max_err < 1:
        raise ScenarioError(f"{where}: max_error_rate must be at least 0 and below 1")
    return Scenario(
        name=name,
        description=str(body.get("description", "")),
        input_len=int(_number(body.get("input_len"), f"{where}: input_len")),
        output_len=int(_number(body.get("output_len"), f"{where}: output_len")),
        rate=_number(rate, f"{where}: rate") if rate is not None else None,
        concurrency=int(conc) if conc is not None else None,
        slos=tuple(_slo_line(s, where) for s in slos),
        attainment=float(attainment) if attainment is not None else None,
        max_error_rate=max_err,
    )


def parse_prices(name: str, body: Any) -> Prices:
    where = f"prices for {name!r}"
    if not isinstance(body, Mapping):
        raise ScenarioError(f"{where} must be a table")
    unknown = set(body) - {"input_per_mtok", "output_per_mtok", "hourly"}
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    vals = {k: _number(v, f"{where}: {k}", positive=False) for k, v in body.items()}
    if any(v < 0 for v in vals.values()):
        raise ScenarioError(f"{where}: prices cannot be negative")
    prices = Prices(vals.get("input_per_mtok"), vals.get("output_per_mtok"), vals.get("hourly"))
    check_prices(prices, where)
    return prices


def check_prices(prices: Prices, where: str) -> None:
    api = prices.input_per_mtok is not None or prices.output_per_mtok is not None
    if api and prices.hourly is not None:
        raise ScenarioError(f"{where}: give an API price (per million tokens) or an hourly price, not both")
    if not api and prices.hourly is None:
        raise ScenarioError(f"{where}: no price given")


def parse_book(doc: Mapping[str, Any], source: str) -> ScenarioBook:
    """Scenarios (``[scenario.NAME]``) and prices (``[prices.NAME]``) of one parsed file."""
    unknown = set(doc) - {"scenario", "prices"}
    if unknown:
        raise ScenarioError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    raw_scenarios = doc.get("scenario") or {}
    raw_prices = doc.get("prices") or {}
    if not isinstance(raw_scenarios, Mapping) or not isinstance(raw_prices, Mapping):
        raise ScenarioError(f"{source}: [scenario.NAME] and [prices.NAME] must be tables")
    scenarios = {str(n): parse_scenario(str(n), b) for n, b in raw_scenarios.items()}
    prices = {str(n): parse_prices(str(n), b) for n, b in raw_prices.items()}
    return ScenarioBook(scenarios, prices, dict.fromkeys(scenarios, source))
