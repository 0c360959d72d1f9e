"""A gray release over time, arm by arm: the window cut into equal buckets, and per arm and bucket
its traffic share, the load it carried (requests in flight on its upstream at dispatch, the records'
``upstream_inflight``), TTFT and E2E percentiles, error rate and each business event per request;
each configuration change as a marker. Pure: records come with their send times (unix seconds).

These are figures to look at, not a verdict: a bucket's percentile rests on that bucket's requests
alone and is left out (None) below ``MIN_BUCKET_N`` of them; the verdicts are the guards' (``arms``).
Bounded: at most ``MAX_BUCKETS`` buckets, whatever the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tokenpace.core.events import ConfigChange, OutcomeEvent
from tokenpace.core.metrics import NS_PER_MS, e2e_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status

MAX_BUCKETS = 120
MIN_BUCKET_N = 5  # requests of an arm in a bucket before its percentiles are drawn


def bucket_seconds(span_s: float, buckets: int = MAX_BUCKETS) -> float:
    """A round bucket width (1, 2, 5 x 10^k seconds) giving at most ``buckets`` buckets."""
    raw = max(span_s, 1.0) / max(buckets, 1)
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400):
        if step >= raw:
            return float(step)
    return 86400.0 * math.ceil(raw / 86400.0)


def _percentiles(values: list[float], buckets: list[int], n: int, q: float) -> list[float | None]:
    """Per bucket, ``np.percentile`` of its values at ``q`` (its linear interpolation, to the last
    bit), all buckets from one sort; None below ``MIN_BUCKET_N`` values."""
    v, b = np.asarray(values, dtype=np.float64), np.asarray(buckets, dtype=np.int64)
    v = v[np.lexsort((v, b))]
    counts = np.bincount(b, minlength=n)
    drawn = counts >= MIN_BUCKET_N
    at = (counts[drawn] - 1) * (q / 100)  # numpy's virtual index for "linear"
    below = np.floor(at)
    gamma, k = at - below, below.astype(np.int64)
    start = (np.cumsum(counts) - counts)[drawn]
    lo, hi = v[start + k], v[start + np.minimum(k + 1, counts[drawn] - 1)]
    diff = hi - lo
    value = np.where(gamma >= 0.5, hi - diff * (1 - gamma), lo + diff * gamma)  # numpy's lerp
    out: list[float | None] = [None] * n
    for i, x in zip(np.flatnonzero(drawn).tolist(), value.tolist(), strict=True):
        out[i] = x
    return out


def _arm_series(
    pairs: Sequence[tuple[float, RequestRecord]], start: float, width: float, n: int
) -> dict[str, Any]:
    per: list[list[RequestRecord]] = [[] for _ in range(n)]
    for t, r in pairs:
        i = int((t - start) // width)
        if 0 <= i < n:
            per[i].append(r)
    out: dict[str, list[Any]] = {k: [] for k in ("requests", "inflight_mean", "ttft_p50", "ttft_p95")}
    out |= {"e2e_p95": [], "error_rate": []}
    ttft: tuple[list[float], list[int]] = ([], [])  # values, their buckets
    e2e: tuple[list[float], list[int]] = ([], [])
    for i, bucket in enumerate(per):
        ok = [r for r in bucket if r.status is Status.OK]
        for (values, at), fn in ((ttft, ttft_ns), (e2e, e2e_ns)):
            got = [v / NS_PER_MS for r in ok if (v := fn(r)) is not None]
            values.extend(got)
            at.extend([i] * len(got))
        load = [r.upstream_inflight for r in bucket if r.upstream_inflight is not None]
        out["requests"].append(len(bucket))
        out["inflight_mean"].append(float(np.mean(load)) if load else None)
        out["error_rate"].append((len(bucket) - len(ok)) / len(bucket) if bucket else None)
    out["ttft_p50"] = _percentiles(*ttft, n, 50)
    out["ttft_p95"] = _percentiles(*ttft, n, 95)
    out["e2e_p95"] = _percentiles(*e2e, n, 95)
    return out


def _events(
    events: Sequence[OutcomeEvent],
    records: Mapping[str, Sequence[tuple[float, RequestRecord]]],
    arms: dict[str, dict[str, Any]],
    start: float,
    width: float,
    n: int,
) -> None:
    """Each event name's count per request of its arm, bucket by bucket (events of no known arm apart).
    An event names its request where it can: it is counted in that request's bucket, since an
    outcome is reported after the answer, often in a bucket where its arm sent nothing."""
    sent = {r.request_id: t for pairs in records.values() for t, r in pairs}
    counts: dict[tuple[str, str], list[int]] = {}
    for e in events:
        at = sent.get(e.request_id, e.unix_s) if e.request_id else e.unix_s
        i = int((at - start) // width)
        if e.arm in arms and 0 <= i < n:
            counts.setdefault((e.arm, e.event), [0] * n)[i] += 1
    for (arm, name), per in sorted(counts.items()):
        requests = arms[arm]["requests"]
        arms[arm]["events"][name] = [c / q if q else None for c, q in zip(per, requests, strict=True)]


def _change(c: ConfigChange) -> dict[str, Any]:
    return {
        "unix_s": c.unix_s,
        "session": c.session,
        "epoch": c.epoch,
        "who": c.who,
        "changed": list(c.changed),
        "split_before": ConfigChange.weights(c.before),
        "split_after": ConfigChange.weights(c.after),
    }


def arms_timeline(
    records: Mapping[str, Sequence[tuple[float, RequestRecord]]],
    events: Sequence[OutcomeEvent],
    changes: Sequence[ConfigChange],
    since_unix: float,
    until_unix: float,
    buckets: int = MAX_BUCKETS,
) -> dict[str, Any]:
    """Per arm (``records``: arm -> (sent unix s, record)), bucket by bucket over [since, until)."""
    times = [t for pairs in records.values() for t, _ in pairs]
    start = max(since_unix, min(times)) if times else since_unix  # no empty days before the traffic
    end = max(until_unix, start + 1.0)
    width = bucket_seconds(end - start, buckets)
    start = math.floor(start / width) * width
    n = min(buckets, max(1, math.ceil((end - start) / width)))
    arms = {arm: _arm_series(pairs, start, width, n) | {"events": {}} for arm, pairs in records.items()}
    totals = [sum(a["requests"][i] for a in arms.values()) for i in range(n)]
    for a in arms.values():
        a["share"] = [q / t if t else None for q, t in zip(a["requests"], totals, strict=True)]
    _events(events, records, arms, start, width, n)
    return {
        "start_unix": start,
        "bucket_s": width,
        "t": [start + i * width for i in range(n)],
        "min_bucket_n": MIN_BUCKET_N,
        "arms": arms,
        "changes": [_change(c) for c in changes if since_unix <= c.unix_s < end],
    }
