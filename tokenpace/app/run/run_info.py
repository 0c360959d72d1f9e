"""The conditions a run was measured under, and the warnings its numbers need beside them."""

from __future__ import annotations

import asyncio
import os
import platform
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tokenpace import __version__
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.core.metrics import Summary
from tokenpace.core.record import MAX_OUTPUT_TOKENS, MAX_TOKENS_PER_CHUNK, RequestRecord, Status, TokenSource
from tokenpace.core.stats import enough_samples, samples_needed
from tokenpace.wire.dialects import get_dialect


def run_conditions(
    cfg: BenchConfig,
    workload: dict[str, Any],
    model: str,
    served: list[str],
    url: str,
    started_at: datetime,
    anchor: dict[str, int],
    prefix: str,
    connections: int,
) -> dict[str, Any]:
    return {
        "model": model,
        "served_models": served,
        "endpoint": url,
        "target": cfg.target,
        "api": get_dialect(cfg.api).name,
        "stream": cfg.stream,
        "load": {
            "mode": "open_loop" if cfg.open_loop else "closed_loop",
            "concurrency": cfg.concurrency,
            "rate": cfg.rate,
            "arrival": cfg.arrival if cfg.open_loop else None,
            "burstiness": cfg.burstiness if cfg.open_loop and cfg.arrival == "gamma" else None,
            "max_concurrency": cfg.max_concurrency,
            "requests": cfg.requests,
            "duration_s": cfg.duration_s,
            "warmup": cfg.warmup,
            "timeout_s": cfg.timeout_s,
            "ramp": cfg.ramp.to_dict() if cfg.ramp is not None else None,
        },
        "workload": workload,
        "sampling": cfg.sampling.to_dict(),
        "seed": cfg.seed,
        "prompt_salt": cfg.prompt_salt,
        "slo": cfg.slo.to_dict(),
        "labels": cfg.labels,
        "request_id_prefix": prefix,
        "headers": sorted(cfg.headers),  # names only: values may be secrets
        "connections_opened": connections,
        "started_at": started_at.isoformat(),
        "clock": {"source": "time.perf_counter_ns", **anchor},
        "tool": {"name": "tokenpace", "version": __version__},
        "client_host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu_count": _cpu_count(),
            "event_loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        },
    }


def send_rate(records: Sequence[RequestRecord]) -> float | None:
    """Requests per second actually sent (measured requests, first send to last)."""
    sent = sorted(r.sent_ns for r in records if r.sent_ns and not r.warmup)
    if len(sent) < 50 or sent[-1] == sent[0]:
        return None  # too few to tell a shortfall from the arrival process's own noise
    return (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)


def run_warnings(cfg: BenchConfig, summary: Summary, achieved_rate: float | None = None) -> list[str]:
    out = []
    if not cfg.stream:
        out.append("streaming off (--no-stream): TTFT equals E2E, and there is no ITL or TPOT")
    if cfg.rate and achieved_rate is not None and achieved_rate < 0.8 * cfg.rate:
        out.append(
            f"LOAD BELOW THE RATE ASKED: requests went out at {achieved_rate:.1f} req/s of the "
            f"{cfg.rate:g} asked"
            + (" (held back by --max-concurrency)" if cfg.max_concurrency else "")
            + "; latency from the scheduled time shows what users arriving on schedule would wait"
        )
    not_sent = summary.counts.get("not_sent", 0)
    if not_sent:
        out.append(f"{not_sent} scheduled requests were never sent (recorded as cancelled, in no rate)")
    tok = summary.tokens
    if tok.mismatched:
        out.append(
            f"client chunk count and server usage disagree on {tok.mismatched} of "
            f"{tok.compared} requests (max {tok.max_abs_diff} tokens): chunks carry "
            f"{tok.tokens_per_chunk or 0:.2f} tokens on average"
        )
    ok = summary.counts.get("ok", 0)
    implausible = tok.output_sources.get(TokenSource.USAGE_IMPLAUSIBLE.value, 0)
    if implausible:
        out.append(
            f"{implausible} requests reported usage beyond what they streamed (over "
            f"{MAX_TOKENS_PER_CHUNK} tokens per chunk, or {MAX_OUTPUT_TOKENS:.0e}): not believed, "
            "their output tokens were counted as one per chunk"
        )
    trace = cfg.workload_opts.trace if cfg.workload_opts is not None else None
    with_template = sum(row.template_in_input for row in trace or ())
    if with_template:
        out.append(
            f"{with_template} of {len(trace or ())} replayed prompts were sent at the captured server's "
            "count, which holds the tokens its chat template added (these records cannot say how many: "
            "template_tokens unknown), so each is that much longer than captured (7 tokens on "
            "tokenpace sim); --trace-template-tokens K takes them off"
        )
    if ok and tok.output_sources.get("server", 0) + implausible < ok:
        out.append("some requests had no server usage: their output tokens were counted as one per chunk")
    short = too_short_for(cfg, summary.ttft_ms.n)
    if short:
        out.append(short)
    return out


def too_short_for(cfg: BenchConfig, measured: int) -> str | None:
    """Said at bench time: the percentiles asked (--percentiles, the --fail-on lines'; P95, the usual
    SLO percentile, always) that rest on too few requests for a gate to decide on them."""
    gated = {q for line in cfg.fail_on if (q := line.q) is not None}
    asked = sorted({95.0, *(cfg.percentiles or ()), *gated})
    short = [p for p in asked if measured and not enough_samples(measured, p)]
    if not short:
        return None
    needs = ", ".join(f"P{p:g} needs {samples_needed(p)}" for p in short)
    judged = "--fail-on and a check on it stay" if any(p in gated for p in short) else "a check on it stays"
    return (
        f"too few requests for a gate on {', '.join(f'P{p:g}' for p in short)}: {measured} measured, "
        f"{needs} (5 beyond it); {judged} undecided: run more with --requests"
    )


def not_found_hint(url: str, base_path: str, records: Sequence[RequestRecord]) -> str | None:
    """When no request succeeded and most got HTTP 404, say what is probably wrong with the URL."""
    sent = [r for r in records if not r.warmup and r.sent_ns]
    if not sent or any(r.status is Status.OK for r in sent):
        return None
    not_found = sum(1 for r in sent if r.http_status == 404)
    if not_found * 2 < len(sent):
        return None
    share = "every request" if not_found == len(sent) else f"{not_found} of {len(sent)} requests"
    if "/v1" not in base_path:
        return (
            f"{share} got HTTP 404: the URL {url} probably lacks /v1 "
            f"(OpenAI-compatible servers serve {url.rstrip('/')}/v1/...)"
        )
    return f"{share} got HTTP 404: check the URL's path and the --model name (see the errors above)"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
