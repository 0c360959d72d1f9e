"""Prometheus /metrics in vLLM's names, so server-side scraping can be built and tested against the sim.

A tiny text-format writer instead of prometheus-client: the sim needs a dozen series with one label,
and observing must cost well under a microsecond on the per-token path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence

# vLLM's bucket sets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


def _fmt(v: float) -> str:
    return repr(float(v)) if v != int(v) or abs(v) > 1e15 else f"{float(v):.1f}"


class Histogram:
    __slots__ = ("bounds", "counts", "help", "name", "sum")

    def __init__(self, name: str, help_: str, bounds: Sequence[float]) -> None:
        self.name, self.help, self.bounds = name, help_, tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v

    def render(self, label: str) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        acc = 0
        for b, c in zip(self.bounds, self.counts, strict=False):
            acc += c
            out.append(f'{self.name}_bucket{{{label},le="{_fmt(b)}"}} {acc}')
        acc += self.counts[-1]
        out.append(f'{self.name}_bucket{{{label},le="+Inf"}} {acc}')
        out.append(f"{self.name}_sum{{{label}}} {self.sum!r}")
        out.append(f"{self.name}_count{{{label}}} {acc}")
        return out


class SimMetrics:
    def __init__(self, model_name: str) -> None:
        self.label = 'model_name="' + model_name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        H = Histogram
        self.ttft = H(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = H(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = H(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token in seconds (older name of the inter-token latency).",
            ITL_BUCKETS,
        )
        self.e2e = H(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_BUCKETS,
        )
        self.queue = H(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase.", REQUEST_BUCKETS
        )
        self.prefill = H(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase.", REQUEST_BUCKETS
        )
        self.decode = H(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase.", REQUEST_BUCKETS
        )
        self.req_prompt = H(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKEN_BUCKETS
        )
        self.req_gen = H(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", TOKEN_BUCKETS
        )
        self.lag = H(
            "tokenpace_sim_emit_lag_seconds",
            "How late the sim wrote a step's tokens against its model time (worst token of the step).",
            LAG_BUCKETS,
        )

    def render(
        self,
        gauges: Mapping[str, float],
        counters: Mapping[str, float],
        extra: Callable[[], list[str]] | None = None,
    ) -> bytes:
        lab = self.label
        lines: list[str] = []
        for name, value in gauges.items():
            lines += [f"# TYPE {name} gauge", f"{name}{{{lab}}} {value!r}"]
        all_counters = {
            "vllm:prompt_tokens_total": self.prompt_tokens,
            "vllm:generation_tokens_total": self.generation_tokens,
            **counters,
        }
        for name, value in all_counters.items():
            lines += [f"# TYPE {name} counter", f"{name}{{{lab}}} {float(value)!r}"]
        lines.append("# TYPE vllm:request_success_total counter")
        for reason, n in self.success.items():
            lines.append(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} {float(n)!r}')
        for h in (
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue,
            self.prefill,
            self.decode,
            self.req_prompt,
            self.req_gen,
            self.lag,
        ):
            lines += h.render(lab)
        if extra:
            lines += extra()
        return ("\n".join(lines) + "\n").encode()
