"""Refresh the pictures of docs/playbook.md: step 2's sweep on the simulator, its report, its charts.

Run by ``make playbook-images``: the same commands as the playbook (a 4-slot simulated engine, a
concurrency sweep, ``tokenpace report --html``), then each chart captured in headless Chromium.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tokenpace.testing.chromium import capture_charts
from tokenpace.testing.procs import FINISHED, cli_command, free_port

CHARTS = {
    "TTFT vs load": "playbook-ttft-vs-load.png",
    "Throughput and goodput per step": "playbook-throughput-vs-load.png",
}
LIMIT_BYTES = 150_000


def wait_healthy(url: str) -> None:
    for _ in range(300):
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the simulator did not answer at {url}")


def make_report(work: Path) -> Path:
    port = free_port()
    sim_command = cli_command("sim", "--port", str(port), "--max-num-seqs", "4")
    sim = subprocess.Popen(sim_command, stdout=subprocess.DEVNULL)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health")
        sweep = ["sweep", "--url", f"http://127.0.0.1:{port}/v1", "--concurrency", "1,2,4,8,16"]
        sweep += ["--requests", "60"]
        sweep += ["--input-len", "512", "--output-len", "8", "--seed", "7", "--slo", "ttft=300ms,tpot=30ms"]
        done = subprocess.run(cli_command(*sweep, "--no-store", "--out", "sweep.json", "-q"), cwd=work)
        if done.returncode not in FINISHED:  # 3: a step where this busy machine fell behind, left out
            raise SystemExit(f"the sweep failed (exit {done.returncode})")
        subprocess.run(cli_command("report", "sweep.json", "--html", "report.html"), cwd=work, check=True)
    finally:
        sim.terminate()
        sim.wait()
    return work / "report.html"


def main(out_dir: str = "docs/img") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tp-playbook-") as tmp:
        page = make_report(Path(tmp))
        asyncio.run(capture_charts(page, {title: out / name for title, name in CHARTS.items()}))
    for name in CHARTS.values():
        size = (out / name).stat().st_size
        print(f"{out / name}: {size:,} bytes")
        if size > LIMIT_BYTES:
            raise SystemExit(f"{out / name} is over {LIMIT_BYTES:,} bytes: lower the scale")


if __name__ == "__main__":
    main(*sys.argv[1:])
