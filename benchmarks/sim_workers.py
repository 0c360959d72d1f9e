"""How much the served simulator carries per worker count (`tokenpace sim --workers N`).

    .venv/bin/python benchmarks/sim_workers.py [--workers 1,2] [--concurrency 256] [--requests 3000]

For each worker count: starts `tokenpace sim --workers N` (each worker a replica of the profile), runs
one `tokenpace bench` against it with the client spread over the same number of processes
(`--workers`), and reads the output tokens per second and whether the client stayed VALID from its
result. Client and simulator share this machine's cores: on a machine with fewer cores than
2 x workers the figure is the machine's, not the simulator's (the table says how many cores ran it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenpace", *args]


def one(workers: int, concurrency: int, requests: int, out_len: int) -> dict[str, float | bool]:
    sim = subprocess.Popen(
        _cli("sim", "--workers", str(workers), "--port", "0", "--profile", "llama-3.1-8b-h100"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.stdout is not None
        found = re.search(r"listening on (http://\S+/v1)", sim.stdout.readline())
        if not found:
            raise SystemExit("the simulator did not start")
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "r.json"
            subprocess.run(
                _cli("bench", "--url", found.group(1), "-c", str(concurrency), "-n", str(requests),
                     "--input-len", "64", "--output-len", str(out_len), "--workers", str(workers),
                     "--no-store", "-q", "--out", str(result)),
                capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            doc = json.loads(result.read_text())
    finally:
        sim.send_signal(signal.SIGINT)
        sim.wait(timeout=30)
    s = doc["summary"]
    return {
        "tokens_per_s": float(s.get("output_token_throughput") or 0.0),
        "requests_per_s": float(s.get("request_throughput") or 0.0),
        "valid": bool((s.get("client") or {}).get("valid", doc.get("valid", True))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--output-len", type=int, default=128)
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; concurrency {args.concurrency}, {args.requests} requests, "
          f"output {args.output_len} tokens, profile llama-3.1-8b-h100 per worker")  # fmt: skip
    print("| sim workers (and client workers) | output tokens/s | requests/s | client VALID |")
    print("|---|---|---|---|")
    for w in (int(x) for x in args.workers.split(",")):
        r = one(w, args.concurrency, args.requests, args.output_len)
        valid = "yes" if r["valid"] else "NO"
        print(f"| {w} | {r['tokens_per_s']:,.0f} | {r['requests_per_s']:,.1f} | {valid} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
