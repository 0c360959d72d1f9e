"""Synthetic latency series (ms) whose neighbouring requests move together, with known percentiles:
for the coverage tests and ``benchmarks/dependent_intervals.py``. Each function returns an array of
shape (trials, n), every row stationary from its first request.

- ``ar1``: 100 exp(0.5 z_t), z an AR(1) of unit variance and lag-one correlation ``rho`` (rho = 0:
  independent requests). Truth: 100 exp(0.5 Phi^-1(q)).
- ``bursts``: a queue that builds every ``period`` requests and drains over ``drain`` of them
  (latency times 1 + 2 x the queue's remaining share), at a random phase per row, on independent
  lognormal noise. Truth: the mixture over the period's phases.
- ``stalls``: a host that stalls now and then (a two-state chain: on average every ``every``
  requests a stall begins, lasting ``lasting`` requests on average), latency 4x during a stall.
- ``near_constant``: a simulator's latency, one level within a fraction of a percent that drifts
  slowly through the run (its median's indicator moves together over the whole run), with a share
  of slower requests; no truth: what a verdict on it must not do is widen past the level's drift.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

_SIGMA = 0.3  # log-sd of the independent noise of bursts and stalls
_STALL_FACTOR = 4.0


def ar1(rng: np.random.Generator, trials: int, n: int, rho: float) -> np.ndarray:
    e = rng.standard_normal((trials, n))
    z = np.empty_like(e)
    z[:, 0] = e[:, 0]
    s = np.sqrt(1 - rho * rho)
    for t in range(1, n):
        z[:, t] = rho * z[:, t - 1] + s * e[:, t]
    return 100 * np.exp(0.5 * z)


def ar1_truth(q: float, rho: float = 0.0) -> float:
    return float(100 * np.exp(0.5 * NormalDist().inv_cdf(q / 100)))


def _queue_share(phase: np.ndarray, drain: int) -> np.ndarray:
    return np.maximum(0.0, 1 - phase / drain)


def bursts(rng: np.random.Generator, trials: int, n: int, period: int = 100, drain: int = 25) -> np.ndarray:
    start = rng.integers(0, period, size=(trials, 1))
    phase = (start + np.arange(n)) % period
    noise = np.exp(_SIGMA * rng.standard_normal((trials, n)))
    out: np.ndarray = 100 * noise * (1 + 2 * _queue_share(phase, drain))
    return out


def bursts_truth(q: float, period: int = 100, drain: int = 25) -> float:
    scale = 100 * (1 + 2 * _queue_share(np.arange(period), drain))
    return _mixture_quantile(q, scale, np.full(period, 1 / period))


def stalls(rng: np.random.Generator, trials: int, n: int, every: int = 150, lasting: int = 8) -> np.ndarray:
    begin, end = 1 / every, 1 / lasting
    stalled = rng.random(trials) < begin / (begin + end)  # the chain's stationary share
    u = rng.random((trials, n))
    state = np.empty((trials, n), dtype=bool)
    for t in range(n):
        state[:, t] = stalled
        stalled = np.where(stalled, u[:, t] >= end, u[:, t] < begin)
    noise = np.exp(_SIGMA * rng.standard_normal((trials, n)))
    return 100 * noise * np.where(state, _STALL_FACTOR, 1.0)


def stalls_truth(q: float, every: int = 150, lasting: int = 8) -> float:
    share = (1 / every) / (1 / every + 1 / lasting)
    return _mixture_quantile(q, np.array([100.0, 100 * _STALL_FACTOR]), np.array([1 - share, share]))


def _mixture_quantile(q: float, scales: np.ndarray, weights: np.ndarray) -> float:
    """The q-th percentile of sum_i w_i Lognormal(log scale_i, _SIGMA), by bisection on its CDF."""
    cdf = NormalDist().cdf
    lo, hi = float(scales.min()) * 1e-3, float(scales.max()) * 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        f = sum(w * cdf(np.log(mid / s) / _SIGMA) for s, w in zip(scales, weights, strict=True))
        lo, hi = (mid, hi) if f < q / 100 else (lo, mid)
    return (lo + hi) / 2


def per_user(
    rng: np.random.Generator, trials: int, n: int, users: int = 20, spread: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """(latencies, each request's user id), both of shape (trials, n)."""
    who = rng.integers(0, users, size=(trials, n))
    factor = np.exp(spread * rng.standard_normal((trials, users)))
    noise = np.exp(_SIGMA * rng.standard_normal((trials, n)))
    return 100 * noise * np.take_along_axis(factor, who, axis=1), who


def per_user_truth(q: float, spread: float = 0.5) -> float:
    return float(100 * np.exp(np.hypot(spread, _SIGMA) * NormalDist().inv_cdf(q / 100)))


def near_constant(
    rng: np.random.Generator,
    trials: int,
    n: int,
    level: float = 36.9,
    drift: float = 0.003,
    tail: float = 0.08,
) -> np.ndarray:
    """Shape (trials, n): ``level`` x (1 + ``drift`` x t / n + 0.05 % noise), a ``tail`` share of
    requests 5-40 % slower."""
    t = np.arange(n) / n
    x = level * (1 + drift * t + 0.0005 * rng.standard_normal((trials, n)))
    slow = rng.random((trials, n)) < tail
    out: np.ndarray = np.where(slow, x * (1 + rng.uniform(0.05, 0.4, (trials, n))), x)
    return out
