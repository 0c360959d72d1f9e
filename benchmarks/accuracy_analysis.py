"""The accuracy benchmark's analysis: client records joined with the truth server's, as errors."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ITL_NS = 10_000_000  # the truth server's gap between token chunks


def _pct(values: list[float] | np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


@dataclass
class _Joined:
    """Client records joined with the server's truth, as lists of milliseconds."""

    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    delay: list[float] = field(default_factory=list)
    server_gaps: list[float] = field(default_factory=list)
    send_side: list[float] = field(default_factory=list)  # server read - client send
    whole: list[float] = field(default_factory=list)  # client TTFT - server TTFT
    ok: int = 0
    mismatched: int = 0
    missing: int = 0

    def add(self, r: dict, t: list[int], read_ns: int | None) -> None:
        c = np.asarray(r["token_ns"], dtype=np.int64)
        s = np.asarray(t, dtype=np.int64)
        if len(c) != len(s):
            self.mismatched += 1
            n = min(len(c), len(s))
            c, s = c[:n], s[:n]
        if not len(c):
            return
        self.ttft.append(float(c[0] - s[0]) / 1e6)
        if read_ns is not None and r["sent_ns"]:
            self.send_side.append((read_ns - r["sent_ns"]) / 1e6)
            self.whole.append(((c[0] - r["sent_ns"]) - (s[0] - read_ns)) / 1e6)
        self.delay.extend(((c - s) / 1e6).tolist())
        self.itl.extend((np.abs(np.diff(c) - np.diff(s)) / 1e6).tolist())
        self.server_gaps.extend(((np.diff(s) - ITL_NS) / 1e6).tolist())


def _join(records: list[dict], server: dict) -> _Joined:
    truth: dict[str, list[int]] = server["truth"]
    read: dict[str, int] = server.get("read", {})
    j = _Joined()
    for r in records:
        if r["status"] != "ok":
            continue
        j.ok += 1
        t = truth.get(r["request_id"])
        if not t:
            j.missing += 1
            continue
        j.add(r, t, read.get(r["request_id"]))
    return j


def analyze(data: dict, server: dict) -> dict:
    recs = data["records"]
    j = _join(recs, server)
    tokens = sum(len(r["token_ns"]) for r in recs)
    first_sent = min((r["sent_ns"] for r in recs if r["sent_ns"]), default=None)
    last_end = max((r["end_ns"] for r in recs if r["end_ns"]), default=None)
    dispatch = [(r["dispatched_ns"] - r["scheduled_ns"]) / 1e6 for r in recs if r["dispatched_ns"]]
    send = [(r["sent_ns"] - r["scheduled_ns"]) / 1e6 for r in recs if r["sent_ns"] and r["scheduled_ns"]]
    if data["kind"] == "tokenpace":
        loop_lag_p99 = data["health"]["loop_lag_ms"]["p99"]
        loop_lag_p50 = data["health"]["loop_lag_ms"]["p50"]
    else:
        loop_lag_p99 = _pct(data["loop_lag_ms"], 99)
        loop_lag_p50 = _pct(data["loop_lag_ms"], 50)
    window_s = (last_end - first_sent) / 1e9 if first_sent and last_end else None
    out = {
        "kind": data["kind"],
        "sent": len(recs),
        "ok": j.ok,
        "errors": sorted({r["error"] for r in recs if r["status"] != "ok" and r.get("error")})[:3],
        "tokens": tokens,
        "tokens_per_s": tokens / window_s if window_s else None,
        "joined_requests": len(j.ttft),
        "missing_truth": j.missing,
        "token_count_mismatch": j.mismatched,
        "ttft_err_ms": {"p50": _pct(j.ttft, 50), "p99": _pct(j.ttft, 99), "max": max(j.ttft, default=None)},
        "send_side_ms": {"p50": _pct(j.send_side, 50), "p99": _pct(j.send_side, 99)},
        "whole_ttft_err_ms": {
            "p50": _pct(j.whole, 50),
            "p99": _pct(j.whole, 99),
            "max": max(j.whole, default=None),
        },
        "itl_abs_err_ms": {"p50": _pct(j.itl, 50), "p99": _pct(j.itl, 99), "n": len(j.itl)},
        "delivery_delay_ms": {
            "p50": _pct(j.delay, 50),
            "p99": _pct(j.delay, 99),
            "max": max(j.delay, default=None),
        },
        "server_gap_late_ms": {"p50": _pct(j.server_gaps, 50), "p99": _pct(j.server_gaps, 99)},
        "loop_lag_ms": {"p50": loop_lag_p50, "p99": loop_lag_p99},
        "dispatch_lag_ms": {"p50": _pct(dispatch, 50), "p99": _pct(dispatch, 99)},
        "send_lag_ms": {"p50": _pct(send, 50), "p99": _pct(send, 99)},
        "cpu_s": data["cpu_s"],
        "wall_s": data["wall_s"],
        "cpu_us_per_token": data["cpu_s"] * 1e6 / tokens if tokens else None,
        "max_rss_mb": data["max_rss_mb"],
        "process": data["process"],
    }
    if data["kind"] == "tokenpace":
        out["valid"] = data["valid"]
        out["invalid_reasons"] = data["invalid_reasons"]
        out["health_cpu_us_per_chunk"] = data["health"]["cpu_us_per_chunk"]
        out["health_cpu_fraction"] = data["health"]["cpu_fraction"]
        out["reported"] = data["reported"]
    return out


def first_wave(records: list[dict], concurrency: int | None) -> dict:
    """Client TTFT of the first wave of a closed loop (its first ``concurrency`` sends, each on a new
    connection opened at the same moment): where start-up costs and a connect burst would show."""
    if not concurrency:
        return {}
    sent = sorted((r for r in records if r["sent_ns"] and r["token_ns"]), key=lambda r: r["sent_ns"])
    ttft = [(r["token_ns"][0] - r["sent_ns"]) / 1e6 for r in sent[:concurrency]]
    return {"n": len(ttft), "p50": _pct(ttft, 50), "max": max(ttft, default=None)}
