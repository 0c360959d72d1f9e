"""How well does a calibrated simulator predict loads it never saw? (issue 26's acceptance protocol)

    .venv/bin/python benchmarks/calibrate_accuracy.py --url http://127.0.0.1:8080/v1   # your engine
    .venv/bin/python benchmarks/calibrate_accuracy.py --sim-args "--profile NAME --max-num-seqs 2"

Calibrates from a short sweep (an input-length ladder at concurrency 1, then concurrency 1, 2, 4),
then measures held-out concurrency 8 and 16 and a Poisson rate at 70 % of the measured maximum, and
prints the validation table (`tokenpace sim --validate`) plus how long the calibration sweep took.
Without --url it serves the simulator (wall clock, with --sim-args) in its own process: a check of
the method against an engine whose model is known, through real HTTP and a real client.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from tokenpace.app.serving.simproc import SimProcess


def _tokenpace(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True)
    if done.returncode not in (0, 3):  # 3: the client fell behind on a busy machine (kept, flagged)
        sys.exit(f"tokenpace {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="The engine's OpenAI-compatible base URL (default: serve the simulator).")
    ap.add_argument("--sim-args", default="--max-num-seqs 2", help="Arguments of the served simulator.")
    ap.add_argument("--input-len", default="64", help="Prompt length of the load steps.")
    ap.add_argument("--output-len", default="32")
    ap.add_argument("--ladder", default="16,128,512,1024", help="Input-length ladder (concurrency 1).")
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        nullcontext(args.url) if args.url else SimProcess(extra_args=shlex.split(args.sim_args)) as url,
    ):
        d = Path(tmp)
        common = ["--url", url, "--keep-going", "--no-store", "-q", "--output-len", args.output_len]
        t0 = time.monotonic()
        _tokenpace("sweep", *common, "--input-len", args.ladder, "-n", "8", "--out", str(d / "ladder.json"))
        _tokenpace("sweep", *common, "--concurrency", "1,2,4", "-n", "40", "--input-len", args.input_len,
                   "--out", str(d / "conc.json"))  # fmt: skip
        sweep_s = time.monotonic() - t0
        prof = d / "calibrated.toml"
        print(_tokenpace("sim", "--calibrate", str(d / "conc.json"), "--calibrate", str(d / "ladder.json"),
                         "--out", str(prof)))  # fmt: skip
        conc = json.loads((d / "conc.json").read_text())
        rate = round(0.7 * max(s["summary"]["request_throughput"] for s in conc["steps"]), 2)
        _tokenpace("sweep", *common, "--concurrency", "8,16", "-n", "64", "--input-len", args.input_len,
                   "--out", str(d / "held.json"))  # fmt: skip
        _tokenpace("sweep", *common, "--rate", str(rate), "-n", "120", "--input-len", args.input_len,
                   "--out", str(d / "rate.json"))  # fmt: skip
        print(_tokenpace("sim", "--validate", str(prof), str(d / "held.json"), str(d / "rate.json")))
        print(
            f"calibration sweep: {sweep_s:.0f} s; held-out rate {rate} req/s (70 % of the measured maximum)"
        )


if __name__ == "__main__":
    main()
