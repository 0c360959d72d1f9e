"""How much slower a core runs right after it idled: the wake-up cost an open loop's engine pays.

    python benchmarks/core_wake.py [--trials 30] [--pieces 40]

A fixed piece of CPU work (PBKDF2-SHA256, 500 rounds: C code on a few hundred bytes, so no cache or
memory effect, ~0.16 ms on a warm core) is timed `--pieces` times back to back after an idle pause
of 1, 10 and 100 ms, `--trials` times each; the table gives the median time of the 1st, 2nd, ...
piece after the pause over the trials, relative to the warm core's (the last pieces after a 1 ms
pause). Then the same with the cores kept awake (tokenpace.testing.awake: a SCHED_IDLE busy loop
per core). A machine tuned for benchmarks (performance governor, shallow C-states) shows ~1.0
everywhere; a core that drops its clock or is descheduled by its hypervisor when idle does not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

import numpy as np

from tokenpace.testing.awake import cores_kept_awake

PAUSES_S = (0.001, 0.01, 0.1)
SHOWN = (1, 2, 3, 5, 10, 20, 40)  # which pieces after the pause the table shows
MAX_TRIALS = MAX_PIECES = 1000  # the timings: at most 3 tables of 1000 x 1000 floats (24 MB)


def _piece() -> None:
    hashlib.pbkdf2_hmac("sha256", b"tokenpace", b"core-wake", 500)


def _after_pause(pause_s: float, trials: int, pieces: int) -> np.ndarray:
    """Median seconds of each piece after the pause, over the trials."""
    times = np.empty((trials, pieces))
    for t in range(trials):
        time.sleep(pause_s)
        for k in range(pieces):
            t0 = time.perf_counter()
            _piece()
            times[t, k] = time.perf_counter() - t0
    return np.median(times, axis=0)


def measure(trials: int, pieces: int) -> dict[float, np.ndarray]:
    return {pause: _after_pause(pause, trials, pieces) for pause in PAUSES_S}


def table(title: str, rows: dict[float, np.ndarray], warm: float) -> str:
    shown = [k for k in SHOWN if k <= len(next(iter(rows.values())))]
    lines = [
        f"{title} (warm piece {warm * 1e3:.3f} ms)",
        "",
        "| idle before | " + " | ".join(f"piece {k}" for k in shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for pause, med in rows.items():
        cells = [f"{med[k - 1] / warm:.2f}x" for k in shown]
        lines.append(f"| {pause * 1e3:g} ms | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--pieces", type=int, default=40)
    args = ap.parse_args()
    if not (1 <= args.trials <= MAX_TRIALS and 2 <= args.pieces <= MAX_PIECES):
        ap.error(f"--trials must be 1-{MAX_TRIALS} and --pieces 2-{MAX_PIECES}")
    print(f"load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs\n")
    plain = measure(args.trials, args.pieces)
    warm = float(np.median(plain[PAUSES_S[0]][args.pieces // 2 :]))
    print(table("cores left to idle", plain, warm) + "\n")
    with cores_kept_awake() as spinners:  # yields once every loop runs in its idle class
        awake = measure(args.trials, args.pieces)
    print(table(f"cores kept awake ({len(spinners)} SCHED_IDLE loops)", awake, warm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
