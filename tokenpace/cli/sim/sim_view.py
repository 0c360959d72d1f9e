"""`tokenpace sim --virtual`: the app runs the load in virtual time; this prints one row per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tokenpace.app.serving.sim_setup import (
    Network,
    Profile,
    StreamedSummary,
    VirtualSummary,
    run_virtual_load,
)
from tokenpace.cli.fit import show_table

_COLUMNS = ("step", "n", "TTFT p50", "p95", "p99", "TPOT p50", "p95", "E2E p50", "req/s", "out tok/s")


def _row(label: str, summary: VirtualSummary | StreamedSummary) -> list[str]:
    s = summary.client
    n = s.counts["ok"]
    if not n:
        return [label, "0", "(no request finished)", *[""] * (len(_COLUMNS) - 3)]
    t, p, e = s.ttft_ms, s.tpot_ms, s.e2e_ms
    tpot = [f"{p.p50:.2f}", f"{p.p95:.2f}"] if p.n else ["-", "-"]
    return [
        label,
        str(n),
        *(f"{v:.1f}" for v in (t.p50, t.p95, t.p99)),
        *tpot,
        f"{e.p50:.1f}",
        f"{s.request_throughput:.2f}",
        f"{s.output_token_throughput:.0f}",
    ]


def run_virtual_cli(o: dict[str, Any], profile: Profile, network: Network) -> None:
    run = run_virtual_load(o, profile, network)
    load = run.load
    if profile.calibrated:
        click.echo(f"predicted: {profile.name} is a calibrated profile ({profile.calibration})")
    click.echo(
        f"virtual run: profile {profile.name}{f' x {run.replicas} replicas' if run.replicas > 1 else ''}, "
        f"network {network.name} "
        f"({network.rtt_ms:g} ms RTT), input {load.input_len.text}, output {load.output_len.text}, "
        f"seed {load.seed}; latencies in ms"
    )
    table = Table(title="latency in ms", title_justify="left")
    for name in _COLUMNS:
        table.add_column(name, justify="left" if name == "step" else "right")
    for label, summary in run.steps:
        table.add_row(*_row(label, summary))
    show_table(Console(), table)
    for line in run.caveats():
        click.echo(f"profile: {line}")
    for label, why in run.undecided_steps():
        click.echo(f"step {label}: UNDECIDED, predicted past what the profile vouches for: {why}")
    if run.records_note:
        click.echo(run.records_note)
    if o.get("out_path"):
        run.write(Path(o["out_path"]))
        click.echo(f"wrote {o['out_path']}")
    if o.get("predicted_sweep"):
        run.write_predicted_sweep(Path(o["predicted_sweep"]))
        click.echo(f"wrote {o['predicted_sweep']} (a sweep of predicted steps: tokenpace plan reads it)")
