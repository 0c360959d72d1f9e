"""How often the sweeps of docs/selection.md's worked example come out NOT VALID beside two CPU
burners, judged by the client-stall rule before and after a hold had to exceed 3 ms to count, at a
user's default tolerance (10 %) and at a test setup's (50 %), run as a user runs them and as a
test's setup does (tokenpace/testing/procs.py: at nice -10 where the host allows).

    .venv/bin/python benchmarks/docs_sweeps_busy.py --runs 5

Each run is every `tokenpace sweep` line of the example, as written but with --no-store and its
--out in a throwaway folder, with two burners (Python busy loops) beside it, killed at the end. The
verdicts are recomputed from each step's JSON and records (`client_stall_ms`); the other validity
reasons (loop lag, dispatch lag, CPU) are kept as they are. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tokenpace.testing.procs import SETUP_NICE, renice

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "selection.md"
STALL_REASONS = ("the client stalled", "the client's stalls")
MIN_HELD_MS = 3.0
RULES = {  # name: (smallest hold counted, share tolerated)
    "before (10 %)": (0.0, 0.10),
    "after (10 %, a user's default)": (MIN_HELD_MS, 0.10),
    "after (50 %, a test's setup)": (MIN_HELD_MS, 0.50),
}


def sweeps() -> list[list[str]]:
    block = re.findall(r"```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("tokenpace sweep ")]
    out = []
    for ln in lines:
        args = shlex.split(ln)[1:]
        keep = [a for i, a in enumerate(args) if a != "--store" and (i == 0 or args[i - 1] != "--store")]
        out.append([a for i, a in enumerate(keep) if a != "--out" and (i == 0 or keep[i - 1] != "--out")])
    return out


def step_valid(step: dict[str, Any], folder: Path, min_held_ms: float, tolerance: float) -> bool:
    others = [r for r in step["invalid_reasons"] if not r.startswith(STALL_REASONS)]
    impact = step["summary"]["client"]["stalls"]["impact"]
    if others or impact["moved"] or impact["stalls_dropped"]:
        return False
    held = requests = 0
    with open(folder / step["records"]["path"], encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("warmup") or not r.get("sent_ns"):
                continue
            requests += 1
            held += (r.get("client_stall_ms") or 0) > min_held_ms
    return held <= tolerance * requests


def run_once(args: list[str], folder: Path, i: int, nice: int) -> dict[str, Any]:
    out = folder / f"sweep{i}.json"
    env = {k: v for k, v in os.environ.items() if k != "TOKENPACE_STALL_TOLERANCE"}
    cmd = [sys.executable, "-m", "tokenpace", *args, "--no-store", "--out", str(out), "-q"]
    pre = (lambda: renice(nice)) if nice else None
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False, timeout=900, preexec_fn=pre)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--burners", type=int, default=2)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the burners are killed on the way out
    burn = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    rows: dict[str, dict[str, int]] = {}
    loads: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for how, nice in (("as a user runs it", 0), (f"as a setup (nice {SETUP_NICE})", SETUP_NICE)):
                for k, sweep in enumerate(sweeps()):
                    name = f"`{' '.join(sweep[:5])} ...`, {how}"
                    counts = rows.setdefault(name, {"runs": 0, **{r: 0 for r in RULES}, "steps": 0})
                    for i in range(args.runs):
                        doc = run_once(sweep, Path(d), k * 100 + i, nice)
                        loads.append(os.getloadavg()[0])
                        counts["runs"] += 1
                        counts["steps"] += len(doc["steps"])
                        for rule, (held_ms, tol) in RULES.items():
                            ok = all(step_valid(s, Path(d), held_ms, tol) for s in doc["steps"])
                            counts[rule] += not ok
                        print(name, i, [counts[r] for r in RULES], f"load {loads[-1]:.1f}", file=sys.stderr)
    finally:
        for p in burn:
            p.kill()
            p.wait()
    print(f"load average after each run: {statistics.mean(loads):.1f} ({min(loads):.1f}-{max(loads):.1f})")
    print("| sweep | runs (steps) | " + " | ".join(f"NOT VALID, {r}" for r in RULES) + " |")
    print("|" + "---|" * (2 + len(RULES)))
    for name, c in rows.items():
        cells = " | ".join(str(c[r]) for r in RULES)
        print(f"| {name} | {c['runs']} ({c['steps']}) | {cells} |")


if __name__ == "__main__":
    main()
