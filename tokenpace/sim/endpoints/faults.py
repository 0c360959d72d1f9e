"""Faults on demand: what a real serving stack does to clients on a bad day (see docs/sim-reference.md).

Each request draws at most one fault, with the configured probabilities (error, 429, hang, cut,
malformed, in that order of precedence). A client may also ask for one with the `x-sim-fault` header
(`500`, `503`, any status code, `429`, `hang`, `cut`, `malformed`), so a test can provoke each case
deterministically. The cold start slows every engine step for the first seconds after launch.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tokenpace.adapters.bounded_read import read_text

KINDS = ("error", "429", "hang", "cut", "malformed")
MAX_FAULTS_BYTES = 64 * 1024  # a fault file is a few settings


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # error | 429 | hang | cut | malformed
    status: int = 0  # for error
    after_tokens: int | None = None  # for cut / malformed / hang: when (None: drawn per request)


@dataclass(frozen=True, slots=True)
class FaultConfig:
    error_rate: float = 0.0
    error_codes: tuple[int, ...] = (500,)
    rate_limit_rate: float = 0.0  # share of requests answered 429
    retry_after_s: float = 1.0
    hang_rate: float = 0.0  # streaming: headers then silence; non-streaming: no answer
    cut_rate: float = 0.0  # connection closed mid-stream, before [DONE]
    malformed_rate: float = 0.0  # one broken JSON chunk in the middle of the stream
    cold_start_s: float = 0.0  # engine steps are slower for this long after launch
    cold_start_factor: float = 5.0
    seed: int = 0
    allow_header: bool = True  # honour x-sim-fault

    def __post_init__(self) -> None:
        rates = (self.error_rate, self.rate_limit_rate, self.hang_rate, self.cut_rate, self.malformed_rate)
        if any(not 0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0 + 1e-9:
            raise ValueError("fault rates must be in [0, 1] and sum to at most 1")
        if any(not 100 <= c <= 599 for c in self.error_codes) or not self.error_codes:
            raise ValueError("error codes must be HTTP status codes (100-599)")
        if self.retry_after_s < 0 or self.cold_start_s < 0 or self.cold_start_factor < 1:
            raise ValueError("retry-after and cold start must be >= 0, cold start factor >= 1")

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> FaultConfig:
        """A JSON object with any of this class's fields, e.g. {"error_rate": 0.05, "error_codes": [503]}."""
        data = json.loads(read_text(path, MAX_FAULTS_BYTES, "a fault file"))
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"{path}: unknown fault setting(s) {', '.join(sorted(unknown))}")
        if "error_codes" in data:
            data["error_codes"] = tuple(int(c) for c in data["error_codes"])
        data.update(overrides)
        return cls(**data)

    @property
    def active(self) -> bool:
        return any(
            (
                self.error_rate,
                self.rate_limit_rate,
                self.hang_rate,
                self.cut_rate,
                self.malformed_rate,
                self.cold_start_s,
            )
        )


@dataclass(slots=True)
class FaultPicker:
    config: FaultConfig = field(default_factory=FaultConfig)
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.rng.seed(self.config.seed)

    def pick(self, header: str | None) -> Fault | None:
        c = self.config
        if header and c.allow_header:
            return parse_fault_header(header)
        u = self.rng.random()
        for kind, rate in (
            ("error", c.error_rate),
            ("429", c.rate_limit_rate),
            ("hang", c.hang_rate),
            ("cut", c.cut_rate),
            ("malformed", c.malformed_rate),
        ):
            if u < rate:
                status = self.rng.choice(c.error_codes) if kind == "error" else 0
                return Fault(kind, status)
            u -= rate
        return None


def parse_fault_header(value: str) -> Fault | None:
    """`503`, `429`, `hang`, `cut`, `cut:5` (after 5 tokens), `malformed`, `malformed:3`, `none`."""
    kind, _, arg = value.strip().lower().partition(":")
    after = int(arg) if arg.isdigit() else None
    if kind.isdigit():
        code = int(kind)
        if code == 429:
            return Fault("429")
        return Fault("error", code) if 100 <= code <= 599 else None
    if kind in ("hang", "cut", "malformed"):
        return Fault(kind, after_tokens=after)
    return None
