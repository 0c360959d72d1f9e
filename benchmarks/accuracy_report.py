"""The accuracy benchmark's record of where it ran (machine) and its results table (BENCHMARKS.md)."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MD_PATH = ROOT / "BENCHMARKS.md"
MD_START, MD_END = "<!-- accuracy:start -->", "<!-- accuracy:end -->"


def machine() -> dict:
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import uvloop

        uvloop_version = uvloop.__version__
    except ImportError:
        uvloop_version = None

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD")
    if git("status", "--porcelain", "--", "tokenpace"):
        commit += " + uncommitted changes in tokenpace/"
    return {
        "commit": commit,
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "uvloop": uvloop_version,
        "kernel": platform.release(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_before": os.getloadavg(),
    }


def _f(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [
        f"Measured {m['date']} on {m['nproc']} cores ({m['cpu_model']}), Linux {m['kernel']}, "
        f"Python {m['python']}, uvloop {m['uvloop']}, tokenpace at {m['commit']}; load average before "
        f"{m['loadavg_before'][0]:.2f}, after {m['loadavg_after'][0]:.2f} (1 min). "
        f"Mode: {'quick' if results['quick'] else 'full'}, {results['elapsed_s']:.0f} s.",
        "",
        "| scenario | client | ok/sent | tokens/s | TTFT err P50 / P99 (ms) "
        "| send side P50 / P99 (ms) | whole TTFT err P50 / P99 (ms) | ITL \\|err\\| P50 / P99 (ms) "
        "| delivery delay P50 / P99 (ms) | loop lag P99 (ms) | dispatch lag P99 (ms) "
        "| CPU µs/token, run / streaming "
        "| max RSS (MB) | server late P99 (ms) | tokenpace's verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in results["scenarios"]:
        for kind, r in sc["clients"].items():
            verdict = "—"
            streaming = r.get("health_cpu_us_per_chunk", r["cpu_us_per_token"])
            send, whole = r.get("send_side_ms", {}), r.get("whole_ttft_err_ms", {})
            if kind == "tokenpace":
                verdict = "valid" if r["valid"] else "**not valid**: " + "; ".join(r["invalid_reasons"])
            lines.append(
                f"| {sc['label']} | {kind} | {r['ok']}/{r['sent']} | {_f(r['tokens_per_s'], 0)} "
                f"| {_f(r['ttft_err_ms']['p50'])} / {_f(r['ttft_err_ms']['p99'])} "
                f"| {_f(send.get('p50'))} / {_f(send.get('p99'))} "
                f"| {_f(whole.get('p50'))} / {_f(whole.get('p99'))} "
                f"| {_f(r['itl_abs_err_ms']['p50'])} / {_f(r['itl_abs_err_ms']['p99'])} "
                f"| {_f(r['delivery_delay_ms']['p50'])} / {_f(r['delivery_delay_ms']['p99'])} "
                f"| {_f(r['loop_lag_ms']['p99'])} | {_f(r['dispatch_lag_ms']['p99'])} "
                f"| {_f(r['cpu_us_per_token'], 0)} / {_f(streaming, 0)} "
                f"| {_f(r['max_rss_mb'], 0)} | {_f(r['server_gap_late_ms']['p99'], 1)} | {verdict} |"
            )
    su = results.get("startup")
    if su:
        lines += [
            "",
            f"Start-up (tokenpace, pinned to one core, median / max of {su['reps']}): "
            f"`tokenpace --help` {su['help_s']['median']:.2f} / {su['help_s']['max']:.2f} s "
            f"({su['help_rss_mb']:.0f} MB RSS); a one-request run (`tokenpace bench --url ... -c 1 -n 1 "
            f"--output-len 1 -q`, server answering at once) {su['tiny_run_s']['median']:.2f} / "
            f"{su['tiny_run_s']['max']:.2f} s ({su['tiny_run_rss_mb']:.0f} MB RSS).",
        ]
    return "\n".join(lines)


def update_md(table: str) -> None:
    text = MD_PATH.read_text() if MD_PATH.exists() else f"# Benchmarks\n\n{MD_START}\n{MD_END}\n"
    if MD_START not in text or MD_END not in text:
        text += f"\n{MD_START}\n{MD_END}\n"
    head, rest = text.split(MD_START, 1)
    _, tail = rest.split(MD_END, 1)
    MD_PATH.write_text(f"{head}{MD_START}\n{table}\n{MD_END}{tail}")
