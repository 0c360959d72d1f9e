"""The client's self-check on a busy host: how often a run is NOT VALID under the old rule (any
stall over 50 ms, or stalls over 5 % of the run) and the new one (stalls judged by the requests they
held), and how far each run's headline figures land from a quiet reference run.

    .venv/bin/python benchmarks/self_check.py --runs 20 --requests 120

One reference run first (no burners), then N runs with two CPU burners (Python busy loops, one per
core of a 2-core host, killed at the end), then N without. Each run is ``tokenpace bench`` against
the built-in simulator (closed loop, 16 users) in its own process. The host's 1-minute load
average is read after each run and reported (mean, min-max): on a shared host "quiet" only means
without this script's burners. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [(m, p) for m in ("ttft_ms", "tpot_ms", "e2e_ms") for p in ("p50", "p95", "p99")]
OLD_LONGEST_MS, OLD_SHARE = 50.0, 0.05  # the rule before: any stall over 50 ms, or over 5 % of the run
STALL_REASONS = ("the client stalled", "the client's stalls")


def bench(out: Path, requests: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "tokenpace",
        "bench",
        "-n",
        str(requests),
        "-q",
        "--no-store",
        "--out",
        str(out),
    ]
    subprocess.run(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600
    )
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def verdicts(run: dict[str, Any], tolerance: float) -> tuple[bool, bool]:
    """(valid under the old rule, valid under the new one at ``tolerance``), from the run's JSON."""
    stalls = run["summary"]["client"]["stalls"]
    impact = stalls["impact"]
    others = [r for r in run["invalid_reasons"] if not r.startswith(STALL_REASONS)]
    old = not others and stalls["longest_ms"] <= OLD_LONGEST_MS and stalls["share"] <= OLD_SHARE
    new = not others and not impact["moved"] and not impact["stalls_dropped"] and impact["share"] <= tolerance
    return old, new


def errors(run: dict[str, Any], ref: dict[str, Any]) -> list[float]:
    """|run - reference| / reference (%), for each headline figure."""
    out = []
    for metric, p in FIGURES:
        a, b = run["summary"][metric][p], ref["summary"][metric][p]
        if a is not None and b:
            out.append(abs(a - b) / b * 100)
    return out


def burners(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


TOLERANCES = (0.05, 0.10)


def phase(name: str, runs: int, requests: int, ref: dict[str, Any], tmp: Path, again: bool) -> dict[str, Any]:
    rows = []
    for i in range(runs):
        path = tmp / f"{name}-{i}.json"
        run = json.loads(path.read_text()) if again else bench(path, requests)
        impact = run["summary"]["client"]["stalls"]["impact"]
        old = verdicts(run, TOLERANCES[0])[0]
        new = [verdicts(run, t)[1] for t in TOLERANCES]
        errs = errors(run, ref)
        longest = run["summary"]["client"]["stalls"]["longest_ms"]
        rows.append({"old": old, "new": new, "impact": impact, "errs": errs, "longest": longest,
                     "load": os.getloadavg()[0]})  # fmt: skip
        print(f"{name} {i}: old {old}, new {new}, held {impact['held']}/{impact['requests']}, moved "
              f"{impact['moved']}, longest {longest:.0f} ms, error median {statistics.median(errs):.1f} %",
              file=sys.stderr)  # fmt: skip

    def err(sel: list[dict[str, Any]]) -> str:
        values = [e for r in sel for e in r["errs"]]
        return f"{statistics.median(values):.1f} / {max(values):.1f} %" if values else "-"

    shares = [r["impact"]["share"] * 100 for r in rows]
    longest = [r["longest"] for r in rows]
    return {
        "name": name,
        "runs": runs,
        "load": "-" if again else _load([r["load"] for r in rows]),
        "old": sum(not r["old"] for r in rows),
        **{f"new{t:g}": sum(not r["new"][k] for r in rows) for k, t in enumerate(TOLERANCES)},
        "moved": sum(bool(r["impact"]["moved"]) for r in rows),
        "held": f"{statistics.median(shares):.1f} / {max(shares):.1f} %",
        "longest": f"{statistics.median(longest):.0f} / {max(longest):.0f} ms",
        "err_all": err(rows),
        "err_rescued": err([r for r in rows if r["new"][1] and not r["old"]]),
    }


def _load(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f} ({min(values):.1f}-{max(values):.1f})"


HEAD = {
    "name": "host",
    "runs": "runs",
    "load": "load avg",
    "old": "NOT VALID, old rule",
    "new0.05": "NOT VALID, new rule (5 %)",
    "new0.1": "NOT VALID, new rule (10 %, the default)",
    "moved": "runs whose stalls moved a figure",
    "held": "requests held, median / max",
    "longest": "longest stall, median / max",
    "err_all": "figures' error vs reference, median / max",
    "err_rescued": "the same, runs only the new rule (10 %) keeps",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--keep", type=Path, help="keep the runs' files in this folder")
    ap.add_argument("--again", action="store_true", help="tabulate the runs kept in --keep, run nothing")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the burners are killed on the way out
    with tempfile.TemporaryDirectory() as d:
        tmp = args.keep or Path(d)
        tmp.mkdir(parents=True, exist_ok=True)
        again = bool(args.again and args.keep)
        ref = json.loads((tmp / "ref.json").read_text()) if again else bench(tmp / "ref.json", args.requests)
        print(f"reference: valid {ref['valid']} {ref['invalid_reasons']}", file=sys.stderr)
        procs = burners(0 if again else 2)
        try:
            busy = phase("busy", args.runs, args.requests, ref, tmp, again)
        finally:
            for p in procs:
                p.kill()
                p.wait()
        quiet = phase("quiet", args.runs, args.requests, ref, tmp, again)
    print("| " + " | ".join(HEAD.values()) + " |")
    print("|" + "---|" * len(HEAD))
    for r in (busy, quiet):
        print("| " + " | ".join(str(r[k]) for k in HEAD) + " |")


if __name__ == "__main__":
    main()
