"""What the calibration and validation claim on a real engine's records (issue 37's acceptance).

    .venv/bin/python benchmarks/calibration_oracle.py [--data tests/data/engines/h200] [--tolerance 0.1]

Calibrates from the records' ladder and concurrency sweep (forced past the fit-quality gate, whose
verdict is printed), validates on the held-out loads, and prints the verdict table as BENCHMARKS.md
shows it, then the acceptance: no row whose error exceeds the tolerance is met, no met row whose
interval is wider than the tolerance, and the profile does not hold while a row misses. Offline: no
engine is needed, only the records (a GPU engine's by default).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tokenpace.app.calibration.calibrate import calibrate
from tokenpace.app.calibration.validate import Validation, validate

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "engines" / "h200"


def table(result: Validation) -> list[str]:
    lines = [
        "| load | metric | predicted ms | measured ms | error | error interval | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result.rows:
        p, v = row.prediction, row.judged
        why = f" ({v.reason})" if v.reason and v.verdict != "met" else ""
        lines.append(
            f"| {p.load} | {p.metric.upper()} P{p.percentile} | {p.predicted_ms:.1f} | {p.measured_ms:.1f} | "
            f"{p.rel_error:+.1%} | {v.low_error:+.0%} to {v.high_error:+.0%} | {v.verdict}{why} |"
        )
    return lines


def acceptance(result: Validation) -> list[str]:
    """The failures of the acceptance (empty: accepted)."""
    tol, bad = result.tolerance, []
    for row in result.rows:
        p, v = row.prediction, row.judged
        if v.verdict == "met" and abs(p.rel_error) > tol:
            bad.append(f"{p.load} {p.metric} P{p.percentile}: met with an error of {p.rel_error:+.1%}")
        if v.verdict == "met" and v.high_error - v.low_error > 2 * tol:
            bad.append(f"{p.load} {p.metric} P{p.percentile}: met with an interval wider than the tolerance")
    if result.verdict == "holds" and any(r.judged.verdict == "missed" for r in result.rows):
        bad.append("the profile holds while a row misses")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="folder with ladder, conc, held, rate JSON")
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for f in args.data.iterdir():
            shutil.copy(f, Path(tmp) / f.name)
        runs = [str(Path(tmp) / "ladder.json"), str(Path(tmp) / "conc.json")]
        done = calibrate(runs, str(Path(tmp) / "oracle.toml"), force=True)
        held = [str(Path(tmp) / "held.json"), str(Path(tmp) / "rate.json")]
        result = validate(done.profile, held, args.tolerance)
    r = done.fit.residuals
    print(f"fit: TTFT {r['prefill_rel_rms']:.1%} RMS, decode step {r['decode_rel_rms']:.1%} RMS; quality: "
          + ("POOR: " + "; ".join(done.problems) if done.problems else "ok"))  # fmt: skip
    for line in (*done.fit.behaviours, *done.fit.moved_within):  # chosen, and how strongly
        print(f"calibration: {line}")
    for line in done.fit.holds:
        if line.startswith("warm-up"):
            print(f"calibration: {line}")
    for line in result.caveats:
        print(f"profile: {line}")
    print("\n".join(table(result)))
    print(f"loads: {result.loads}; judged at: {result.speeds}; profile: {result.verdict}")
    failures = acceptance(result)
    print("acceptance: " + ("met" if not failures else "NOT met: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
