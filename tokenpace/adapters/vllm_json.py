"""A run in the shape of ``vllm bench serve --save-result``, so scripts and dashboards built on that
file read tokenpace's runs. Pure conversion: tokenpace's records and summary in, vLLM's keys out.

vLLM's conventions kept: ``ttfts`` and ``itls`` in seconds, one entry per measured request (a failed
one: ttft 0, no itls, its error text in ``errors``); ``*_ms`` figures over successful requests, std as
numpy's (ddof 0), percentiles by linear interpolation; percentile keys ``p99_ttft_ms``,
``p99.9_ttft_ms``. The throughputs and counts are tokenpace's own summary's, so the two files agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tokenpace.adapters.safe_files import check_output, write_atomic
from tokenpace.core.metrics import Summary, e2e_ns, itl_gaps_ns, tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status

METRICS = ("ttft", "tpot", "itl", "e2el")
DEFAULT_METRICS = ("ttft", "tpot", "itl")
DEFAULT_PERCENTILES = (99.0,)
# vLLM keeps these per-request lists only with --save-detailed
DETAILED_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


@dataclass(frozen=True)
class VllmExport:
    """Where and how a run is also written in vLLM's shape (--vllm-json, --save-result)."""

    path: Path
    metrics: tuple[str, ...] = DEFAULT_METRICS
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    detailed: bool = True  # the per-request lists (vLLM: only with --save-detailed)
    append: bool = False  # vLLM's --append-result: a newline, then the JSON, at the end of the file
    model_id: str | None = None  # vLLM's --model when --served-model-name named what was sent
    backend: str = "tokenpace"
    extra: dict[str, Any] = field(default_factory=dict)  # label, tokenizer_id, --metadata keys


def default_file_name(
    label: str, request_rate: Any, max_concurrency: int | None, model_id: str, ramp: tuple[Any, Any, Any]
) -> str:
    """vLLM's own result file name: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json."""
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    conc = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    model = str(model_id).split("/")[-1]
    strategy, start, end = ramp
    if strategy:
        return f"{label}-ramp-up-{strategy}-{start:g}qps-{end:g}qps{conc}-{model}-{stamp}.json"
    return f"{label}-{float(request_rate)}qps{conc}-{model}-{stamp}.json"


def check_export(export: VllmExport) -> None:
    """Before any load: the file can be written (OutputPathError)."""
    check_output(export.path, "--result-filename")


def write_export(export: VllmExport, result: dict[str, Any]) -> None:
    """Written whole (atomically), or appended as vLLM's --append-result does."""
    data = orjson.dumps(result)
    if not export.append:
        write_atomic(export.path, data)
        return
    export.path.parent.mkdir(parents=True, exist_ok=True)
    with export.path.open("ab") as f:
        if f.tell():
            f.write(b"\n")
        f.write(data)


def percentile_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _prompt_len(r: RequestRecord) -> int:
    return r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested or 0


def _samples_ms(ok: Sequence[RequestRecord]) -> dict[str, list[float]]:
    return {
        "ttft": [t / 1e6 for r in ok if (t := ttft_ns(r)) is not None],
        "tpot": [tp / 1e6 for r in ok if (tp := tpot_ns(r)) is not None],
        "itl": [g / 1e6 for r in ok for g in itl_gaps_ns(r)],
        "e2el": [t / 1e6 for r in ok if (t := e2e_ns(r)) is not None],
    }


def vllm_result(
    records: Sequence[RequestRecord],
    summary: Summary,
    conditions: dict[str, Any],
    metrics: Sequence[str] = DEFAULT_METRICS,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    export: VllmExport | None = None,
    texts: dict[str, str] | None = None,
) -> dict[str, Any]:
    """vLLM's result keys; ``export`` adds its label, tokenizer and metadata keys and drops the
    per-request lists unless detailed; ``texts`` (request id -> text) gives ``generated_texts``."""
    measured = [r for r in records if not r.warmup and r.sent_ns]
    ok = [r for r in measured if r.status is Status.OK]
    load = conditions.get("load") or {}
    out: dict[str, Any] = {
        "date": conditions.get("started_at"),
        "backend": export.backend if export else "tokenpace",
        "model_id": (export.model_id if export else None) or conditions.get("model"),
        "num_prompts": len(measured),
        "request_rate": load.get("rate") if load.get("rate") is not None else "inf",
        "burstiness": load.get("burstiness") or 1.0,
        "max_concurrency": load.get("max_concurrency") or load.get("concurrency"),
        "duration": summary.window_s,
        "completed": len(ok),
        "failed": len(measured) - len(ok),
        "total_input_tokens": sum(_prompt_len(r) for r in ok),
        "total_output_tokens": sum(r.output_tokens for r in ok),
        "request_throughput": summary.request_throughput,
        "request_goodput": summary.goodput,
        "output_throughput": summary.output_token_throughput,
        "total_token_throughput": summary.total_token_throughput,
        "input_lens": [_prompt_len(r) for r in measured],
        "output_lens": [r.output_tokens if r.status is Status.OK else 0 for r in measured],
        "ttfts": [(ttft_ns(r) or 0) / 1e9 if r.status is Status.OK else 0.0 for r in measured],
        "itls": [[g / 1e9 for g in itl_gaps_ns(r)] if r.status is Status.OK else [] for r in measured],
        "errors": [r.error or "" for r in measured],
    }
    samples = _samples_ms(ok)
    for metric in metrics:
        values = np.asarray(samples[metric], dtype=float)
        some = values.size > 0
        out[f"mean_{metric}_ms"] = float(values.mean()) if some else 0.0
        out[f"median_{metric}_ms"] = float(np.median(values)) if some else 0.0
        out[f"std_{metric}_ms"] = float(values.std()) if some else 0.0
        for p in percentiles:
            out[f"p{percentile_word(p)}_{metric}_ms"] = float(np.percentile(values, p)) if some else 0.0
    if texts is not None:
        out["generated_texts"] = [texts.get(r.request_id, "") for r in measured]
    if export is not None:
        out.update({k: v for k, v in export.extra.items() if v is not None})
        ramp = load.get("ramp") or {}
        if ramp.get("strategy") and ramp.get("start_rps") is not None:
            out.update(
                ramp_up_strategy=ramp["strategy"],
                ramp_up_start_rps=ramp["start_rps"],
                ramp_up_end_rps=ramp["end_rps"],
            )
        if not export.detailed:
            for key in DETAILED_KEYS:
                out.pop(key, None)
    return out
