"""What a measured load says about the engine's steps, read from the client's records alone.

Pure. A calibration needs three kinds of observation, each taken where the load makes it clean:

- prefill: the TTFT of a request that was alone in the engine (nothing else in flight between its send
  and its first token), against its prompt length;
- decode: a request's time per output token, against how many requests were decoding alongside it
  (averaged over its steps) and their total context, less the prompts of requests that joined
  mid-way (their prefill shares steps with this decode): `engine_decode_obs`;
- concurrency: the most requests ever decoding at once, which shows a scheduler limit when a load asked
  for more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.metrics import NS_PER_S
from tokenpace.core.record import RequestRecord, Status

# Requests of one load used (the pairwise overlaps cost O(n^2) time): the first ones, in send order.
MAX_REQUESTS_PER_LOAD = 3000

MAX_KV_SAMPLES = 10_000
MIN_KV_USAGE = 0.05  # below this a gauge's rounding dominates the estimate


@dataclass(frozen=True, slots=True)
class MeasuredLoad:
    """One load of a measured run: its records and what the server said about it."""

    label: str  # "c=4", "2/s"
    records: tuple[RequestRecord, ...]
    concurrency: int | None = None  # closed loop users
    rate: float | None = None  # open loop req/s
    # The server's running gauge at each scrape that showed requests waiting (at most MAX_KV_SAMPLES),
    # where exported: a slot limit shows as the same value scrape after scrape.
    server_running_when_waiting: tuple[float, ...] = ()
    server_max_kv_usage: float | None = None  # 0..1
    server_network_ms: float | None = None  # client TTFT - engine TTFT (the server's own histogram)
    # The server's KV-cache usage (0..1) at its scrapes: (perf_counter ns, usage), at most
    # MAX_KV_SAMPLES of them.
    kv_samples: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class PrefillObs:
    prompt_tokens: float
    ttft_s: float


@dataclass(frozen=True, slots=True)
class DecodeObs:
    load: str
    batch: float  # time-averaged requests decoding together
    context: float  # their total context, tokens (mean over the decode phase)
    step_s: float  # time per output token, joining prefills taken out
    prompt_tokens: float


@dataclass(slots=True)
class Timeline:
    """A load's usable requests as arrays (seconds from the first send)."""

    sent: np.ndarray
    first: np.ndarray
    end: np.ndarray
    prompt: np.ndarray
    out: np.ndarray


def usable(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """Measured, successful, streamed requests with a prompt count and at least two tokens."""
    ok = [
        r
        for r in records
        if not r.warmup
        and r.sent_ns
        and r.status is Status.OK
        and r.first_token_ns is not None
        and r.end_ns is not None
        and r.end_ns > r.first_token_ns
        and r.output_tokens >= 2
        and prompt_of(r) > 0
    ]
    ok.sort(key=lambda r: r.sent_ns)
    return ok[:MAX_REQUESTS_PER_LOAD]


def prompt_of(r: RequestRecord) -> int:
    """Tokens the engine prefilled: the server's count (it includes the chat template) when given."""
    return r.prompt_tokens if r.prompt_tokens is not None else (r.prompt_tokens_requested or 0)


def timeline(records: Sequence[RequestRecord]) -> Timeline | None:
    ok = usable(records)
    if not ok:
        return None
    t0 = ok[0].sent_ns

    def secs(values: list[int]) -> np.ndarray:
        return (np.asarray(values, dtype=np.int64) - t0) / NS_PER_S

    return Timeline(
        sent=secs([r.sent_ns for r in ok]),
        first=secs([r.first_token_ns or 0 for r in ok]),
        end=secs([r.end_ns or 0 for r in ok]),
        prompt=np.asarray([prompt_of(r) for r in ok], dtype=float),
        out=np.asarray([r.output_tokens for r in ok], dtype=float),
    )


def prefill_observations(tl: Timeline) -> list[PrefillObs]:
    """Requests alone in flight from their send to their first token: TTFT is prefill + fixed parts."""
    starts, ends = tl.sent, tl.end
    obs = []
    for i in range(len(starts)):
        others = (starts < tl.first[i]) & (ends > starts[i])
        others[i] = False
        if not others.any():
            obs.append(PrefillObs(float(tl.prompt[i]), float(tl.first[i] - starts[i])))
    return obs


def max_decoding_at_once(tl: Timeline) -> int:
    """The most requests decoding at the same time (intervals shrunk by half a step against jitter)."""
    tol = 0.5 * float(np.median((tl.end - tl.first) / (tl.out - 1)))
    events = [(s + tol, 1) for s in tl.first] + [(t - tol, -1) for t in tl.end]
    events.sort(key=lambda ev: (ev[0], ev[1]))  # at a tie, a finish frees its place first
    now = best = 0
    for _, delta in events:
        now += delta
        best = max(best, now)
    return best


def kv_capacity_estimates(load: MeasuredLoad) -> list[float]:
    """KV capacity in tokens, once per scrape that saw the cache at least 5 % full: the tokens the
    decoding requests held then (prompt plus tokens made so far, from the client's records) over
    the usage the server reported. Requests still in prefill are not counted (a slight underestimate)."""
    ok = usable(load.records)
    out = []
    for at, usage in load.kv_samples[:MAX_KV_SAMPLES]:
        if usage < MIN_KV_USAGE:
            continue
        held = 0.0
        for r in ok:
            first, end = r.first_token_ns or 0, r.end_ns or 0
            if first <= at < end:
                made = (
                    sum(1 for t in r.token_ns if t <= at)
                    if r.token_ns
                    else 1 + (r.output_tokens - 1) * (at - first) / (end - first)
                )
                held += prompt_of(r) + made
        if held > 0:
            out.append(held / usage)
    return out
