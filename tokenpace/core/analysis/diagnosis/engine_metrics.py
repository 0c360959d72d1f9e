"""What an engine's own metrics say about a run, and where the client's TTFT went. Pure.

Input: scrapes of the engine's Prometheus endpoint ({"t_ns", "samples": {series key: value}}),
taken in another process on the same monotonic clock as the request records. Engines name the same
thing differently (and rename it between versions); each is mapped to one canonical name here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.core.metrics import ttft_ns
from tokenpace.core.record import RequestRecord, Status

# canonical name -> candidate metric names, newest naming first
GAUGES = {
    "running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
        "llamacpp:requests_processing",
    ),
    "waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "llamacpp:requests_deferred",
    ),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"),
}
RATIO_GAUGES = {"kv_usage", "prefix_hit_rate"}  # fractions: averaged, not added, across label sets
COUNTERS = {
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
}
HISTOGRAMS = {  # seconds
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "tgi_request_queue_duration"),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "tgi_request_duration"),
    "itl": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
        "tgi_request_mean_time_per_token_duration",
    ),
}
GATEWAY, GATEWAY_PREFIX = "tokenpace-gateway", "tokenpace_gateway_"
ENGINE_PREFIXES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("tgi_", "tgi"), ("llamacpp:", "llama.cpp"))


def normalize(samples: dict[str, float]) -> dict[str, float]:
    """SGLang exports both ``sglang:x`` and (newer) ``sglang_x``; fold the latter into the former."""
    if not any(k.startswith("sglang_") for k in samples):
        return samples
    return {("sglang:" + k[7:] if k.startswith("sglang_") else k): v for k, v in samples.items()}


def detect_engine(samples: dict[str, float]) -> str:
    counts = {engine: 0 for _, engine in ENGINE_PREFIXES}
    for key in samples:
        for prefix, engine in ENGINE_PREFIXES:
            if key.startswith(prefix):
                counts[engine] += 1
    best = max(counts, key=counts.__getitem__)
    if counts[best]:
        return best
    if any(key.startswith(GATEWAY_PREFIX) for key in samples):
        return GATEWAY  # tokenpace's own proxy: its metrics are of traffic, not of an engine
    return "unknown"


def _name(key: str) -> str:
    return key.split("{", 1)[0]


def _sum_of(samples: dict[str, float], names: Sequence[str]) -> float | None:
    """Sum over label sets of the first candidate name present."""
    for name in names:
        values = [v for k, v in samples.items() if _name(k) == name]
        if values:
            return sum(values)
    return None


def _mean_of(samples: dict[str, float], names: Sequence[str]) -> float | None:
    """Mean over label sets (e.g. data-parallel engines) of the first candidate name present."""
    for name in names:
        values = [v for k, v in samples.items() if _name(k) == name]
        if values:
            return sum(values) / len(values)
    return None


def _histogram(
    samples: dict[str, float], names: Sequence[str]
) -> tuple[dict[float, float], float, float] | None:
    """(cumulative count per upper bound, sum, count), summed over label sets."""
    for name in names:
        count = _sum_of(samples, (name + "_count",))
        if count is None:
            continue
        total = _sum_of(samples, (name + "_sum",)) or 0.0
        buckets: dict[float, float] = {}
        for key, value in samples.items():
            if _name(key) == name + "_bucket":
                le = key.split('le="', 1)[1].split('"', 1)[0]
                bound = float("inf") if le in ("+Inf", "Inf") else float(le)
                buckets[bound] = buckets.get(bound, 0.0) + value
        return buckets, total, count
    return None


def _quantile(buckets: dict[float, float], q: float) -> tuple[float | None, list[float] | None]:
    """Prometheus' histogram_quantile (linear interpolation inside the bucket), and that bucket's
    bounds: the true quantile lies somewhere in them, wherever the interpolation puts it."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None, None
    rank = q * buckets[bounds[-1]]
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            edges = [prev_bound, bound]
            if bound == float("inf"):
                return prev_bound, edges
            if count == prev_count:
                return bound, edges
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count), edges
        prev_bound, prev_count = bound, count
    return prev_bound, [prev_bound, float("inf")]


def _percentile(
    delta: dict[float, float], q: float, n: float
) -> tuple[float | None, list[float | None] | None]:
    """A quantile in ms with its bucket in ms; None when every observation fell in that one bucket
    (interpolating there only spreads them evenly over it: P50 of a 0-300 ms bucket would read 150 ms
    whatever the real latencies; the mean, from the histogram's sum, is then the figure to use)."""
    value, edges = _quantile(delta, q)
    if value is None or edges is None:
        return None, None
    lo, hi = edges
    inside = delta.get(hi, 0.0) - max((v for b, v in delta.items() if b <= lo), default=0.0)
    ms: list[float | None] = [lo * 1000, hi * 1000 if hi != float("inf") else None]
    return (None if inside >= n else value * 1000), ms


def _window_latency(
    first: dict[str, float], last: dict[str, float], names: Sequence[str]
) -> dict[str, Any] | None:
    """Mean and quantiles (ms) of what the histogram observed between two scrapes. Quantiles come from
    buckets: each is given with its bucket (``p50_bucket_ms``: the true value lies in it), and is None
    when all observations fell in one bucket."""
    a, b = _histogram(first, names), _histogram(last, names)
    if b is None:
        return None
    a_buckets, a_sum, a_count = a if a is not None else ({}, 0.0, 0.0)
    b_buckets, b_sum, b_count = b
    n = b_count - a_count
    if n <= 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None}
    delta = {k: v - a_buckets.get(k, 0.0) for k, v in b_buckets.items()}
    p50, p50_bucket = _percentile(delta, 0.5, n)
    p95, p95_bucket = _percentile(delta, 0.95, n)
    return {
        "n": round(n),
        "mean": (b_sum - a_sum) / n * 1000,
        "p50": p50,
        "p95": p95,
        "p50_bucket_ms": p50_bucket,
        "p95_bucket_ms": p95_bucket,
        "percentiles_from": "histogram buckets, interpolated inside the bucket; None when every "
        "observation fell in one bucket (use the mean)",
    }


def analyse(
    scrapes: Sequence[dict[str, Any]], records: Sequence[RequestRecord], start_ns: int, streamed: bool = True
) -> dict[str, Any]:
    """Series, engine-side latencies over the run, and the TTFT decomposition (``streamed``; without
    streaming there is none: the first token comes with the whole response, see ``_unstreamed``)."""
    good = [(s["t_ns"], normalize(s["samples"])) for s in scrapes if "samples" in s]
    out: dict[str, Any] = {"scrapes": len(scrapes), "errors": len(scrapes) - len(good)}
    if not good:
        out["engine"] = "unknown"
        return out
    engine = detect_engine(good[-1][1])
    out["engine"] = engine
    series: dict[str, list[list[float]]] = {}
    for canonical, names in GAUGES.items():
        read = _mean_of if canonical in RATIO_GAUGES else _sum_of
        points = [[(t - start_ns) / 1e9, v] for t, s in good if (v := read(s, names)) is not None]
        if points:
            series[canonical] = points
    out["series"] = series
    (t0, first), (t1, last) = good[0], good[-1]
    out["window_s"] = [(t0 - start_ns) / 1e9, (t1 - start_ns) / 1e9]
    counters: dict[str, float] = {}
    for canonical, names in COUNTERS.items():
        a, b = _sum_of(first, names), _sum_of(last, names)
        if b is not None:
            counters[canonical] = b - (a or 0.0)
    if counters.get("prefix_queries"):
        counters["prefix_hit_rate"] = counters.get("prefix_hits", 0.0) / counters["prefix_queries"]
    out["counters"] = counters
    latency = {k: lat for k, names in HISTOGRAMS.items() if (lat := _window_latency(first, last, names))}
    out["engine_latency_ms"] = latency
    decompose = _decompose if streamed else _unstreamed
    out["decomposition"] = decompose(latency, records, t0, t1)
    return out


def _decompose(
    latency: dict[str, Any], records: Sequence[RequestRecord], t0: int, t1: int
) -> dict[str, Any] | None:
    """Client TTFT = network and client + engine queue + engine prefill, as means (means add up;
    percentiles do not). Compares the requests whose first token came between the two scrapes,
    warm-up included, because the engine counted those too; it assumes tokenpace was the only
    client of the engine during the run."""
    ttfts = [
        t
        for r in records
        if r.status is Status.OK
        and r.first_token_ns is not None
        and t0 <= r.first_token_ns <= t1
        and (t := ttft_ns(r)) is not None
    ]
    engine_ttft = (latency.get("ttft") or {}).get("mean")
    queue = (latency.get("queue") or {}).get("mean")
    prefill = (latency.get("prefill") or {}).get("mean")
    if engine_ttft is None and queue is not None and prefill is not None:
        engine_ttft = queue + prefill
    if not ttfts or engine_ttft is None:
        return None
    client = sum(ttfts) / len(ttfts) / 1e6
    return {
        "requests": len(ttfts),
        "client_ttft_mean_ms": client,
        "engine_ttft_mean_ms": engine_ttft,
        "engine_queue_mean_ms": queue,
        "engine_prefill_mean_ms": prefill,
        "network_and_client_ms": client - engine_ttft,
        "network_share": (client - engine_ttft) / client if client > 0 else None,
        "method": "means over requests whose first token fell between the first and last scrape",
    }


def _unstreamed(
    latency: dict[str, Any], records: Sequence[RequestRecord], t0: int, t1: int
) -> dict[str, Any] | None:
    """Whole responses (no streaming): the client's "first token" is the end of the response, so client
    TTFT is E2E and holds the engine's decode time; there is no TTFT decomposition. What adds up is
    client E2E = engine E2E + network and client, when the engine reports its E2E."""
    e2es = [
        r.end_ns - r.sent_ns
        for r in records
        if r.status is Status.OK and r.end_ns is not None and t0 <= r.end_ns <= t1
    ]
    engine_e2e = (latency.get("e2e") or {}).get("mean")
    engine_ttft = (latency.get("ttft") or {}).get("mean")
    if not e2es or (engine_e2e is None and engine_ttft is None):
        return None
    client = sum(e2es) / len(e2es) / 1e6
    return {
        "streamed": False,
        "requests": len(e2es),
        "client_e2e_mean_ms": client,
        "engine_e2e_mean_ms": engine_e2e,
        "engine_ttft_mean_ms": engine_ttft,
        "engine_queue_mean_ms": (latency.get("queue") or {}).get("mean"),
        "engine_prefill_mean_ms": (latency.get("prefill") or {}).get("mean"),
        "network_and_client_ms": None if engine_e2e is None else client - engine_e2e,
        "method": "no streaming: no TTFT decomposition (client TTFT is E2E, decode included); client "
        "E2E = engine E2E + network and client, means over requests that ended between the first and "
        "last scrape",
    }
