"""What the GPUs said during a run: DCGM's readings per GPU and as the mean over GPUs. Pure.

Input: scrapes in the shape of the engine's ({"t_ns", "samples": {series key: value}}), taken by
the same scraper process on the same monotonic clock as the request records, of a dcgm-exporter
page (NVIDIA's names and labels) or of ``nvidia-smi``'s answer rewritten in those names. Readings
are aligned to the run's timeline as ``engine_metrics.analyse`` aligns the engine's: seconds since
the run's start. A reading out of its field's range (a hostile or broken page) is dropped, counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.analysis.evidence.window_mean import window_mean

# canonical name -> (DCGM field, lowest and highest plausible reading, unit)
FIELDS: dict[str, tuple[str, float, float, str]] = {
    "util_pct": ("DCGM_FI_DEV_GPU_UTIL", 0.0, 100.0, "%"),
    "fb_used_mib": ("DCGM_FI_DEV_FB_USED", 0.0, 16e6, "MiB"),
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", 0.0, 1e5, "W"),
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", 0.0, 1e5, "MHz"),
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.0, 1.0, "ratio"),
}
BY_DCGM = {dcgm: name for name, (dcgm, *_) in FIELDS.items()}
# GPUs kept per scrape (an 8-GPU node twice over); label sets past it are counted, not kept
MAX_GPUS = 16
LABEL_CHARS = 128  # a label value kept (model name, host) is cut to this


def _name(key: str) -> str:
    return key.split("{", 1)[0]


def _labels(key: str) -> dict[str, str]:
    if "{" not in key:
        return {}
    out = {}
    for part in key.split("{", 1)[1].rstrip("}").split('",'):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip('"')[:LABEL_CHARS]
    return out


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as dcgm-exporter labels it (``gpu`` is its index on the host)."""

    gpu: str
    uuid: str
    model: str
    hostname: str

    @property
    def key(self) -> str:
        """Unique over hosts: two nodes both have a GPU 0."""
        return f"{self.hostname}/{self.gpu}" if self.hostname else self.gpu

    def to_dict(self) -> dict[str, str]:
        return {"gpu": self.gpu, "uuid": self.uuid, "model": self.model, "hostname": self.hostname}


@dataclass
class Readings:
    """One scrape's readings: {gpu key: {canonical: value}}, the GPUs seen, what was dropped."""

    values: dict[str, dict[str, float]]
    gpus: dict[str, Gpu]
    dropped: int = 0  # readings out of range or past MAX_GPUS


def readings(samples: dict[str, float]) -> Readings:
    out = Readings({}, {})
    for key, value in samples.items():
        canonical = BY_DCGM.get(_name(key))
        if canonical is None:
            continue
        _, lo, hi, _ = FIELDS[canonical]
        labels = _labels(key)
        gpu = Gpu(
            labels.get("gpu", labels.get("UUID", "")),
            labels.get("UUID", ""),
            labels.get("modelName", ""),
            labels.get("Hostname", ""),
        )
        if not math.isfinite(value) or not lo <= value <= hi:
            out.dropped += 1
            continue
        if gpu.key not in out.values and len(out.values) >= MAX_GPUS:
            out.dropped += 1
            continue
        out.gpus.setdefault(gpu.key, gpu)
        out.values.setdefault(gpu.key, {})[canonical] = value
    return out


def has_gpu_metrics(samples: dict[str, float]) -> bool:
    return any(_name(k) in BY_DCGM for k in samples)


def analyse_gpu(scrapes: Sequence[dict[str, Any]], start_ns: int) -> dict[str, Any]:
    """Per GPU and mean-over-GPUs series (seconds since ``start_ns``), the GPUs seen, and counts."""
    out: dict[str, Any] = {"scrapes": len(scrapes), "errors": 0, "dropped_readings": 0}
    per_gpu: dict[str, dict[str, list[list[float]]]] = {}
    mean: dict[str, list[list[float]]] = {}
    gpus: dict[str, Gpu] = {}
    for scrape in scrapes:
        if "samples" not in scrape:
            out["errors"] += 1
            continue
        got = readings(scrape["samples"])
        out["dropped_readings"] += got.dropped
        t = (scrape["t_ns"] - start_ns) / 1e9
        for key, gpu in got.gpus.items():
            if key in gpus or len(gpus) < MAX_GPUS:  # over the run too: at most MAX_GPUS series
                gpus.setdefault(key, gpu)
        for canonical in FIELDS:
            values = [v[canonical] for key, v in got.values.items() if canonical in v and key in gpus]
            for key, v in got.values.items():
                if canonical in v and key in gpus:
                    per_gpu.setdefault(canonical, {}).setdefault(key, []).append([t, v[canonical]])
            if values:
                mean.setdefault(canonical, []).append([t, sum(values) / len(values)])
    out["gpus"] = [g.to_dict() for g in gpus.values()]
    out["series"] = {"mean": mean, "per_gpu": per_gpu}
    out["units"] = {name: unit for name, (*_, unit) in FIELDS.items()}
    return out


def steady_readings(analysis: dict[str, Any], lo_s: float, hi_s: float) -> dict[str, Any]:
    """Each field over the steady window: the mean over GPUs (with its interval) and each GPU's."""
    series = analysis.get("series") or {}
    out: dict[str, Any] = {"window_s": [lo_s, hi_s]}
    for canonical in FIELDS:
        points = (series.get("mean") or {}).get(canonical)
        if not points:
            continue
        _, low, high, _ = FIELDS[canonical]
        entry = window_mean(points, lo_s, hi_s).to_dict()
        if entry["ci95"]:  # the true mean is within the field's range whatever the noise
            entry["ci95"] = [max(low, entry["ci95"][0]), min(high, entry["ci95"][1])]
        entry["per_gpu"] = {
            key: window_mean(p, lo_s, hi_s).mean
            for key, p in ((series.get("per_gpu") or {}).get(canonical) or {}).items()
        }
        out[canonical] = entry
    return out
