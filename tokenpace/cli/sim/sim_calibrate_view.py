"""`tokenpace sim --calibrate` and `--validate`: the fit's report and the validation table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tokenpace.app.calibration.calibrate import calibrate, profile_named
from tokenpace.app.calibration.validate import Validation, validate
from tokenpace.app.run.outputs import ExitStatus
from tokenpace.app.run.terms import check_output


def calibrate_cli(o: dict[str, Any]) -> None:
    if not o.get("out_path"):
        raise ValueError("--calibrate needs --out PROFILE.toml (where to write the profile)")
    done = calibrate(
        list(o["calibrate"]), o["out_path"], max_num_seqs=o.get("max_num_seqs"), force=bool(o.get("force"))
    )
    profile, fit = done.profile, done.fit
    click.echo(f"calibrated profile {profile.name} from {len(o['calibrate'])} run file(s)")
    for line in done.refused:
        click.echo(line)
    click.echo(f"{'parameter':<20} {'value':>12}  {'unit':<13} {'from':<10} how / why")
    for p in fit.params:
        status = "data" if p.identified else "default"
        click.echo(f"{p.name:<20} {p.value:>12.4g}  {p.unit:<13} {status:<10} {p.how}")
    r = fit.residuals
    click.echo(
        f"fit residuals: TTFT {r['prefill_rel_rms']:.1%} RMS over {r['prefill_groups']:.0f} prompt "
        "length(s), "
        f"decode step {r['decode_rel_rms']:.1%} RMS over {r['decode_groups']:.0f} group(s)"
    )
    for line in fit.behaviours:  # which scheduler behaviour the loads supported, how strongly
        click.echo(f"behaviour: {line}")
    for line in fit.moved_within:
        click.echo(f"engine moved: {line}")
    for line in fit.holds:
        click.echo(f"where it holds: {line}")
    for problem in done.problems:
        click.echo(f"fit quality: POOR: {problem}")
    if not done.written:
        click.echo(
            f"tokenpace sim: the engine model does not describe this engine: {o['out_path']} not written "
            "(--force writes it marked, and every prediction from it is undecided)",
            err=True,
        )
        sys.exit(ExitStatus.ABORTED)  # the fit failed its own gate
    mark = " MARKED: its fit failed the quality gate" if done.problems else ""
    click.echo(f"wrote {o['out_path']}{mark}  (serve it: tokenpace sim --profile {o['out_path']})")


def validate_cli(o: dict[str, Any]) -> None:
    runs = list(o.get("runs") or ())
    if not runs:
        raise ValueError(
            "--validate PROFILE needs one or more held-out runs: tokenpace sim --validate P RUN..."
        )
    if o.get("out_path"):
        check_output(Path(o["out_path"]), "--out")
    profile = profile_named(o["validate"])
    result = validate(profile, runs, tolerance=o.get("tolerance") or 0.10)
    show_validation(result, profile.calibrated, len(runs))
    if o.get("out_path"):
        result.write(Path(o["out_path"]))
        click.echo(f"wrote {o['out_path']}")
    sys.exit(result.exit_code)


def show_validation(result: Validation, calibrated: bool, files: int) -> None:
    kind = "calibrated, predicted" if calibrated else "shipped profile, predicted"
    click.echo(
        f"validation of {result.profile} ({kind}) on {files} held-out run file(s); times in ms; "
        f"tolerance {result.tolerance:.0%}"
    )
    for line in result.caveats:
        click.echo(f"profile: {line}")
    for line in result.refused:
        click.echo(line)
    click.echo(
        f"{'load':<18} {'metric':<9} {'predicted':>10} {'measured':>10} {'error':>8}  "
        f"{'error interval':>17}  verdict"
    )
    for row in result.rows:
        p, v = row.prediction, row.judged
        interval = f"{_pct(v.low_error)} {_pct(v.high_error)}"
        why = f" ({v.reason})" if v.reason and v.verdict != "met" else ""
        click.echo(
            f"{p.load:<18} {p.metric.upper() + ' P' + str(p.percentile):<9} {p.predicted_ms:>10.2f} "
            f"{p.measured_ms:>10.2f} {p.rel_error:>+8.1%}  {interval:>17}  {v.verdict}{why}"
        )
    for load, verdict in result.loads.items():
        notes = "; ".join(result.notes.get(load) or []) or "within what the profile was fitted on"
        click.echo(f"load {load}: {verdict.upper()} ({notes})")
    counts = {k: sum(1 for r in result.rows if r.judged.verdict == k) for k in ("met", "missed", "undecided")}
    click.echo(
        f"profile {result.profile}: {result.verdict.upper()} (rows: {counts['met']} met, "
        f"{counts['missed']} missed, {counts['undecided']} undecided)"
    )


def _pct(x: float) -> str:
    if x == float("inf"):
        return "+inf"
    if x == float("-inf"):
        return "-inf"
    return f"{x:+.0%}"
