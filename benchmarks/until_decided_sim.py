"""``check --until-decided`` with one stored baseline run, against the simulator: does it decide a
true +20 % regression, or say that the baseline side needs runs (never loop on candidate runs)?

Two served simulators on 127.0.0.1 (``tokenpace sim``, llama-3.1-8b-h100 with a step floor so every
engine step takes it): the baseline's engine, and the candidate's with the floor 20 % longer, so its
TTFT and TPOT are truly +20 %. Per trial, a fresh store: one baseline run (``bench``, stored, the
baseline), one candidate run, then, from the same store each time:

- ``no way to rerun``: ``check --until-decided --max-runs 6`` (candidate runs only);
- ``--baseline-url``: the same, with the baseline's engine named, so the side that limits is run.

Gate ``ttft.p50=5%``. Counts REGRESSED, PASS (wrong), UNDECIDED saying "the baseline needs N more
run(s)", other UNDECIDED; and the runs each added (median).

    .venv/bin/python benchmarks/until_decided_sim.py [--trials 10] [--requests 60] [--floor-ms 15]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenpace.sim.profiles.profile import get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.testing.procs import free_port, start_service, wait_listening

ROOT = Path(__file__).resolve().parent.parent
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GATE = ["--baseline", "prod", "--max-regression", "ttft.p50=5%"]
SLOWER = 1.20
ADDED = re.compile(
    r"and (\d+) added, against baseline prod \(1 stored run\(s\)(?: and (\d+) measured again)?"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tokenpace", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)


INVALID = [0]  # stored runs NOT VALID (a busy host's client stalls), measured again


def bench(url: str, db: str, requests: int, *more: str) -> None:
    """One valid stored run (a NOT VALID one cannot be judged: measured again, at most 5 times)."""
    for _ in range(5):
        done = cli("bench", "--url", url, "--model", MODEL, "-n", str(requests), "-c", "4", "--input-len",
                   "16", "--output-len", "8", "--quiet", "--store", db, *more)  # fmt: skip
        if done.returncode == 0:
            return
        if done.returncode != 3:
            raise SystemExit(f"bench failed: {done.stderr[-2000:]}")
        INVALID[0] += 1
    raise SystemExit("five NOT VALID runs in a row: the host is too busy")


def judge(db: str, *more: str) -> tuple[str, int, int]:
    """(outcome, candidate runs added, baseline runs added) of one ``check --until-decided``."""
    done = cli("check", *GATE, "--run", "version=slow", "--until-decided", "--max-runs", "6", "--quiet",
               "--store", db, *more)  # fmt: skip
    text = " ".join(done.stdout.split())
    m = ADDED.search(text)
    if done.returncode not in (0, 1, 2) or m is None:
        raise SystemExit(f"check failed ({done.returncode}): {text[-1500:]} {done.stderr[-1500:]}")
    outcome = {0: "PASS", 1: "REGRESSED"}.get(done.returncode, "UNDECIDED")
    if outcome == "UNDECIDED" and "the baseline needs" in text:
        outcome = "UNDECIDED: the baseline needs runs"
    return outcome, int(m.group(1)), int(m.group(2) or 0)


def engine(tmp: Path, name: str, floor_ms: float, seed: int) -> tuple[subprocess.Popen[str], str]:
    path = tmp / f"{name}.toml"
    profile = get_profile("llama-3.1-8b-h100").with_overrides(efficiency={"step_floor_ms": floor_ms})
    path.write_text(profile_to_toml(profile))
    port = free_port()
    proc = start_service("sim", "--port", str(port), "--profile", str(path), "--seed", str(seed))
    wait_listening(port, proc)
    return proc, f"http://127.0.0.1:{port}/v1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--floor-ms", type=float, default=15.0)
    a = ap.parse_args()
    rows: dict[str, list[tuple[str, int, int]]] = {"no way to rerun": [], "--baseline-url": []}
    started, load0 = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        procs = []
        try:
            base_proc, base_url = engine(tmp, "base", a.floor_ms, 0)
            procs.append(base_proc)
            cand_proc, cand_url = engine(tmp, "cand", a.floor_ms * SLOWER, 1)
            procs.append(cand_proc)
            for t in range(a.trials):
                db_path = tmp / f"t{t}.db"
                db = f"sqlite:///{db_path}"
                bench(base_url, db, a.requests)
                cli("baseline", "set", "prod", "latest", "--store", db)
                bench(cand_url, db, a.requests, "--label", "version=slow")
                shutil.copy(db_path, tmp / f"t{t}-b.db")
                rows["no way to rerun"].append(judge(db))
                rows["--baseline-url"].append(
                    judge(f"sqlite:///{tmp / f't{t}-b.db'}", "--baseline-url", base_url)
                )
                print(t, rows["no way to rerun"][-1], rows["--baseline-url"][-1], file=sys.stderr)
        finally:
            for p in reversed(procs):
                p.terminate()
                p.wait(timeout=30)
    print(f"{a.trials} trials, {(time.time() - started) / 60:.1f} min, load average {load0:.1f} at the start "
          f"and {os.getloadavg()[0]:.1f} at the end; {INVALID[0]} stored run(s) NOT VALID, measured "
          "again", file=sys.stderr)  # fmt: skip
    print("| check --until-decided, 1 baseline run, true +20 % | trials | REGRESSED | PASS | UNDECIDED: "
          "the baseline needs runs | UNDECIDED, other | candidate runs added, median (max) | baseline "
          "runs added, median (max) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, got in rows.items():
        n = len(got)
        count = {k: sum(1 for o, _, _ in got if o == k) for k in
                 ("REGRESSED", "PASS", "UNDECIDED: the baseline needs runs", "UNDECIDED")}  # fmt: skip
        cand, base = [c for _, c, _ in got], [b for _, _, b in got]
        added = f"{statistics.median(cand):g} ({max(cand)}) | {statistics.median(base):g} ({max(base)})"
        said = count["UNDECIDED: the baseline needs runs"]
        print(f"| {name} | {n} | {count['REGRESSED']}/{n} | {count['PASS']}/{n} | {said}/{n} | "
              f"{count['UNDECIDED']}/{n} | {added} |")  # fmt: skip


if __name__ == "__main__":
    main()
