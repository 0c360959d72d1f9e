"""Token-length distributions given on the command line, sampled with a seeded generator.

Forms: ``512`` (fixed), ``256:1024`` (uniform, inclusive), ``normal:512,128`` (mean, std),
``lognormal:512,0.5`` (median, sigma), ``128,512,2048`` (a mix of bins, equal weights) and
``128@3,2048@1`` (a mix with weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# The longest prompt or output a length spec may ask for (2^20 tokens): beyond it the spec is a
# typo (``--input-len 1e12`` would build a multi-TiB prompt), not a model's context.
MAX_TOKENS = 1_048_576


class LengthSpecError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LengthDist:
    kind: str  # fixed | uniform | normal | lognormal | mix
    params: tuple[float, ...]
    weights: tuple[float, ...] = ()
    text: str = ""

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n lengths, each at least 1."""
        k, p = self.kind, self.params
        if k == "fixed":
            out = np.full(n, p[0])
        elif k == "uniform":
            out = rng.integers(int(p[0]), int(p[1]) + 1, size=n)
        elif k == "normal":
            out = np.rint(rng.normal(p[0], p[1], size=n))
        elif k == "lognormal":
            out = np.rint(p[0] * np.exp(rng.normal(0.0, p[1], size=n)))
        else:
            probs = np.asarray(self.weights) / sum(self.weights)
            out = rng.choice(np.asarray(p), size=n, p=probs)
        lengths: np.ndarray = np.clip(out, 1, MAX_TOKENS).astype(np.int64)  # a wide lognormal stays bounded
        return lengths

    @property
    def mean(self) -> float:
        k, p = self.kind, self.params
        if k in ("fixed", "normal"):
            return p[0]
        if k == "uniform":
            return (p[0] + p[1]) / 2
        if k == "lognormal":
            return float(p[0] * np.exp(p[1] ** 2 / 2))
        return float(np.dot(p, self.weights) / sum(self.weights))

    def describe(self) -> dict[str, Any]:
        return {
            "spec": self.text,
            "kind": self.kind,
            "params": list(self.params),
            "weights": list(self.weights),
            "mean": self.mean,
        }


def _positive(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise LengthSpecError(f"{spec!r}: {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise LengthSpecError(f"{spec!r}: {text!r} must be a positive number")
    if value > MAX_TOKENS:
        raise LengthSpecError(f"{spec!r}: {text!r} is over the maximum of {MAX_TOKENS:,} tokens")
    return value


def parse_length(spec: str) -> LengthDist:
    """Parse a length spec; raises LengthSpecError with a message fit for the user."""
    spec = spec.strip()
    if not spec:
        raise LengthSpecError("empty length spec")
    if ":" in spec and spec.split(":", 1)[0] in ("normal", "lognormal"):
        kind, rest = spec.split(":", 1)
        parts = rest.split(",")
        if len(parts) != 2:
            raise LengthSpecError(f"{spec!r}: expected {kind}:CENTER,SPREAD, e.g. {kind}:512,128")
        center, spread = (_positive(x, spec) for x in parts)
        return LengthDist(kind, (center, spread), text=spec)
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 2:
            raise LengthSpecError(f"{spec!r}: a range is LOW:HIGH, e.g. 256:1024")
        low, high = (int(_positive(x, spec)) for x in parts)
        if low > high:
            raise LengthSpecError(f"{spec!r}: LOW must not exceed HIGH")
        return LengthDist("uniform", (low, high), text=spec)
    if "," in spec or "@" in spec:
        values, weights = [], []
        for item in spec.split(","):
            value, _, weight = item.partition("@")
            values.append(int(_positive(value, spec)))
            weights.append(_positive(weight, spec) if weight else 1.0)
        return LengthDist("mix", tuple(values), tuple(weights), text=spec)
    return LengthDist("fixed", (int(_positive(spec, spec)),), text=spec)
