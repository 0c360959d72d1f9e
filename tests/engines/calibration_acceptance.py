"""Issue 26's acceptance procedure on a real engine, shared by the llama-server, vLLM and transformers
serve tests.

Calibrate from a sweep of under 5 minutes (an input-length ladder at concurrency 1, then concurrency
1, 2, 4 of 64-token prompts, 32 output tokens) against an engine whose slot limit is 2, so
concurrency 4 shows it; predict held-out concurrency 8 and 16 and a Poisson rate at 70 % of the
measured maximum; the target is TTFT and TPOT at P50 and P95, and E2E at P50, within 10 %.

Then concurrency 8 is run again, last, to count the noise between runs: the engine's own change on
the same load a minute later. A target is missed for certain only where the prediction's whole
interval lies beyond 10 % plus that change; otherwise the miss is undecided (the measurement itself
moved that much).

Throughout, the cores are kept out of their idle states (tokenpace.testing.awake): on this
project's 2-core VM a core that idled 10 ms ran its next few ms of work 1.5-1.8x slower, and
1.7-2.0x after 100 ms (benchmarks/core_wake.py). The calibration's closed loops never let the
engine idle, the open loop's gaps between arrivals do, and that alone made the open loop's
predictions too fast (docs/sim.md).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpace.app.calibration.calibrate import calibrate
from tokenpace.app.calibration.validate import validate
from tokenpace.testing.awake import cores_kept_awake
from tokenpace.testing.procs import FINISHED, run_cli

OUT = "32"  # output tokens per request
TARGETS = {("ttft", 50), ("ttft", 95), ("tpot", 50), ("tpot", 95), ("e2e", 50)}
SLOTS = 2  # the engine's limit on requests decoding at once, as the tests start it


def _sweep(url: str, out: Path, *args: str, model: str | None = None) -> dict[str, Any]:
    given = ("--model", model) if model else ()  # transformers serve's model list is not what it serves
    done = run_cli(
        "sweep", "--url", url, *given, "--keep-going", "--no-store", "-q", "--output-len", OUT,
        "--server-metrics-interval", "250ms", "--out", str(out), *args, timeout=300,
    )  # fmt: skip
    assert done.returncode in FINISHED, done.stderr[-3000:]  # 3: the client fell behind (busy cores)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


REPEATED = "c=8 in=64"  # the held-out load run twice


@dataclass
class Acceptance:
    calibration_s: float
    max_num_seqs: int | None
    rows: list[Any]  # the validation's rows: load, metric, percentile, predicted, measured, error
    # the engine's own change on REPEATED run again (measured again / measured - 1), per target
    between_runs: dict[tuple[str, int], float]
    # the scheduler behaviours the calibration chose (or left undecided), with their support
    behaviours: tuple[str, ...] = ()
    # the validation's own verdict per load (met | missed | undecided) and its notes (why)
    verdicts: dict[str, str] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)

    def vouched(self, loads: set[str]) -> set[str]:
        """Of ``loads``, those whose prediction the tool vouched for (judged "met"): a load it called
        missed or undecided is the model saying it does not fit there, not predicting."""
        return {load for load in loads if self.verdicts.get(load) == "met"}

    def _off(self) -> list[Any]:
        return [r for r in self.rows if (r.metric, r.percentile) in TARGETS and abs(r.rel_error) > 0.10]

    def _surely_off(self, r: Any) -> bool:
        """The prediction's whole interval beyond 10 % plus the engine's own change between runs."""
        tol = 0.10 + abs(self.between_runs.get((r.metric, r.percentile), 0.0))
        return bool(r.low_ms > r.measured_ms * (1 + tol) or r.high_ms < r.measured_ms * (1 - tol))

    @property
    def misses(self) -> list[tuple[str, str, int, str]]:
        """Targets off by more than 10 % (decided or not)."""
        return [(r.load, r.metric, r.percentile, f"{r.rel_error:+.1%}") for r in self._off()]

    @property
    def decided_misses(self) -> list[tuple[str, str, int, str]]:
        """Misses whose prediction interval lies wholly beyond 10 % plus the engine's own change."""
        off = [r for r in self._off() if self._surely_off(r)]
        return [(r.load, r.metric, r.percentile, f"{r.rel_error:+.1%}") for r in off]


def write_table(rows: list[Any], name: str, header: str, between_runs: dict[tuple[str, int], float]) -> Path:
    """The error table as docs/sim.md shows it (signed relative error per load and metric; last, the
    engine's own change on the repeated load), with the load average, to
    $TMPDIR/tokenpace-NAME-calibrate.md: the last run's, for the docs."""
    cols = [(m, p) for m in ("ttft", "tpot", "e2e") for p in (50, 95)]
    err = {(r.load, r.metric, r.percentile): r.rel_error for r in rows}
    again = f"{REPEATED} run again (measured vs measured)"
    err.update({(again, m, p): v for (m, p), v in between_runs.items()})
    loads = [*dict.fromkeys(r.load for r in rows), again]
    lines = [
        f"{header}; load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "",
        "| load | " + " | ".join(f"{m.upper()} P{p}" for m, p in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for load in loads:
        cells = [f"{err[(load, m, p)]:+.1%}" if (load, m, p) in err else "-" for m, p in cols]
        lines.append(f"| {load} | " + " | ".join(cells) + " |")
    out = Path(tempfile.gettempdir(), f"tokenpace-{name}-calibrate.md")
    out.write_text("\n".join(lines) + "\n")
    return out


def run_acceptance(url: str, tmp_path: Path, name: str, model: str | None = None) -> Acceptance:
    """Calibrate, predict the held-out loads, print the table (pytest -s) and write it (write_table).
    ``model``: the --model every sweep passes (None: the first the server lists)."""
    with cores_kept_awake():
        return _run_acceptance(url, tmp_path, name, model)


def _run_acceptance(url: str, tmp_path: Path, name: str, model: str | None) -> Acceptance:
    t0 = time.monotonic()
    _sweep(url, tmp_path / "ladder.json", "--input-len", "16,128,512,1024", "-n", "8", model=model)
    conc = _sweep(
        url, tmp_path / "conc.json", "--concurrency", "1,2,4", "-n", "40", "--input-len", "64", model=model
    )
    calibration_s = time.monotonic() - t0
    # forced: the acceptance judges the predictions, whatever the fit-quality gate says (printed)
    done = calibrate(
        [str(tmp_path / "conc.json"), str(tmp_path / "ladder.json")],
        str(tmp_path / f"{name}.toml"),
        force=True,
    )
    profile, fit = done.profile, done.fit
    print(f"\n{name}: fit quality {'POOR: ' + '; '.join(done.problems) if done.problems else 'ok'}")
    for line in (*fit.behaviours, *fit.moved_within):  # the behaviour chosen, and how strongly
        print(f"{name}: {line}")
    max_rps = max(s["summary"]["request_throughput"] for s in conc["steps"])
    rate = round(0.7 * max_rps, 2)
    _sweep(url, tmp_path / "held.json", "--concurrency", "8,16", "-n", "64", "--input-len", "64", model=model)
    _sweep(url, tmp_path / "rate.json", "--rate", str(rate), "-n", "120", "--input-len", "64", model=model)
    _sweep(url, tmp_path / "again.json", "--concurrency", "8", "-n", "64", "--input-len", "64", model=model)
    result = validate(profile, [str(tmp_path / "held.json"), str(tmp_path / "rate.json")])
    again = validate(profile, [str(tmp_path / "again.json")])
    rows = [r.prediction for r in result.rows]
    first = {(r.metric, r.percentile): r.measured_ms for r in rows if r.load == REPEATED}
    between = {
        (r.metric, r.percentile): r.measured_ms / first[(r.metric, r.percentile)] - 1
        for r in (row.prediction for row in again.rows)
        if r.load == REPEATED and first.get((r.metric, r.percentile))
    }
    chosen = "; ".join(line.split(" (")[0] for line in fit.behaviours)  # "step law: line; scheduler: ..."
    header = f"calibration sweep {calibration_s:.0f} s, cores kept awake; {chosen}; {profile.calibration}"
    write_table(rows, name, header, between)
    print(f"\n{name}: {header}")
    for r in rows:
        print(
            f"{r.load:<18} {r.metric.upper()} P{r.percentile}: predicted {r.predicted_ms:8.2f} ms, "
            f"measured {r.measured_ms:8.2f} ms, error {r.rel_error:+.1%}, in interval: {r.inside}"
        )
    for (metric, p), change in between.items():
        print(f"{REPEATED} run again: {metric.upper()} P{p} measured {change:+.1%} against its first run")
    for load, notes in result.notes.items():
        print(load, notes)
    print(f"verdicts at 10 %: profile {result.verdict}, loads {result.loads}")
    accepted = Acceptance(
        calibration_s, fit.max_num_seqs, rows, between, fit.behaviours, dict(result.loads),
        {load: list(n) for load, n in result.notes.items()},
    )  # fmt: skip
    print(
        f"off by > 10 %: {accepted.misses}; "
        f"of those, beyond the engine's own change: {accepted.decided_misses}"
    )
    return accepted
