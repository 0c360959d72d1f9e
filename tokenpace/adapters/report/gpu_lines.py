"""The GPUs over a run's steady window, in sentences and as a table (console, Markdown, HTML alike)."""

from __future__ import annotations

from typing import Any

from tokenpace.adapters.report.tables import Table, fmt

COLUMNS = (
    ("util_pct", "util %"),
    ("power_w", "power W"),
    ("fb_used_mib", "memory MiB"),
    ("sm_clock_mhz", "SM MHz"),
    ("gr_engine_active", "engine active"),
)


def _span(entry: dict[str, Any], digits: int = 0) -> str:
    ci = entry.get("ci95")
    mean = fmt(entry.get("mean"), digits)
    return f"{mean} (95 % {fmt(ci[0], digits)}-{fmt(ci[1], digits)})" if ci else mean


def gpu_lines(result: dict[str, Any]) -> list[str]:
    """What the GPUs did, or nothing when they were not read."""
    gpu = result.get("gpu_metrics")
    if not gpu:
        return []
    gpus = gpu.get("gpus") or []
    models = sorted({g.get("model") or "?" for g in gpus})
    head = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({', '.join(models)}) from {gpu.get('source')}"
    steady = gpu.get("steady") or {}
    figures = []
    if "util_pct" in steady:
        figures.append(f"utilisation {_span(steady['util_pct'])} %")
    if "power_w" in steady:
        figures.append(f"power {_span(steady['power_w'])} W")
    if "fb_used_mib" in steady:
        figures.append(f"memory {fmt(steady['fb_used_mib'].get('mean'), 0)} MiB")
    if "sm_clock_mhz" in steady:
        figures.append(f"SM clock {fmt(steady['sm_clock_mhz'].get('mean'), 0)} MHz")
    where = "mean over GPUs in the steady window" if len(gpus) > 1 else "in the steady window"
    out = [
        f"{head}: {', '.join(figures)} ({where})" if figures else f"{head}: no reading in the steady window"
    ]
    bad = []
    if gpu.get("errors"):
        bad.append(f"{gpu['errors']} of {gpu.get('scrapes')} reads failed")
    if gpu.get("dropped_readings"):
        bad.append(f"{gpu['dropped_readings']} readings out of range or past the GPU bound, dropped")
    if bad:
        out.append("GPU reads: " + "; ".join(bad))
    return out


def gpu_table(result: dict[str, Any]) -> Table | None:
    """One row per GPU and the mean over GPUs, each field's mean over the steady window."""
    steady = (result.get("gpu_metrics") or {}).get("steady") or {}
    fields = [(key, name) for key, name in COLUMNS if key in steady]
    if not fields:
        return None
    headers = ["GPU", *(name for _, name in fields)]
    keys = list((steady[fields[0][0]].get("per_gpu") or {}).keys())
    rows: list[list[Any]] = [
        [key, *((steady[f].get("per_gpu") or {}).get(key) for f, _ in fields)] for key in keys
    ]
    rows.append(["mean over GPUs", *(steady[f].get("mean") for f, _ in fields)])
    return headers, rows
