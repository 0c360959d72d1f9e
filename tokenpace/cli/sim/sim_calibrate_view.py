"""`tokenpace sim --calibrate` and `--validate`: the fit's report and the validation table."""

from __future__ import annotations

from typing import Any

import click

from tokenpace.app.calibration.calibrate import calibrate, profile_named, validate


def calibrate_cli(o: dict[str, Any]) -> None:
    if not o.get("out_path"):
        raise ValueError("--calibrate needs --out PROFILE.toml (where to write the profile)")
    profile, fit = calibrate(list(o["calibrate"]), o["out_path"], max_num_seqs=o.get("max_num_seqs"))
    click.echo(f"calibrated profile {profile.name} from {len(o['calibrate'])} run file(s)")
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
    for line in fit.holds:
        click.echo(f"where it holds: {line}")
    click.echo(f"wrote {o['out_path']}  (serve it: tokenpace sim --profile {o['out_path']})")


def validate_cli(o: dict[str, Any]) -> None:
    runs = list(o.get("runs") or ())
    if not runs:
        raise ValueError(
            "--validate PROFILE needs one or more held-out runs: tokenpace sim --validate P RUN..."
        )
    profile = profile_named(o["validate"])
    result = validate(profile, runs)
    rows = result.rows
    kind = "calibrated, predicted" if profile.calibrated else "shipped profile, predicted"
    click.echo(f"validation of {profile.name} ({kind}) on {len(runs)} held-out run file(s); times in ms")
    click.echo(
        f"{'load':<22} {'metric':<8} {'predicted':>10} {'measured':>10} {'error':>8}  {'interval':>19}  in it"
    )
    for p in rows:
        interval = f"{p.low_ms:.2f}-{p.high_ms:.2f}"
        click.echo(
            f"{p.load:<22} {p.metric.upper() + ' P' + str(p.percentile):<8} {p.predicted_ms:>10.2f} "
            f"{p.measured_ms:>10.2f} {p.rel_error:>+8.1%}  {interval:>19}  {'yes' if p.inside else 'no'}"
        )
    for load, lines in result.notes.items():
        for line in lines or ["within what the profile was fitted on"]:
            click.echo(f"{load}: {line}")
    worst = max((abs(p.rel_error) for p in rows), default=0.0)
    inside = sum(p.inside for p in rows)
    click.echo(f"largest error {worst:.1%}; measured value inside the interval for {inside} of {len(rows)}")
