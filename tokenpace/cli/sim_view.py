"""`tokenpace sim --virtual`: options -> VirtualLoad, run it, print one row per step, save the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tokenpace.cli.fit import show_table
from tokenpace.sim.profile import Network, Profile
from tokenpace.sim.virtual import run_virtual
from tokenpace.sim.virtual_load import VirtualLoad
from tokenpace.sim.virtual_summary import VirtualSummary, steps_of, summarize_virtual, virtual_run_doc


def virtual_load_from_options(o: dict[str, Any]) -> VirtualLoad:
    """The load from `tokenpace sim` options (lengths and duration already parsed)."""
    rates: tuple[float, ...] = ()
    if o.get("rate"):
        try:
            rates = tuple(float(r) for r in str(o["rate"]).split(","))
        except ValueError:
            raise ValueError(f"bad --rate {o['rate']!r}: use R or a ladder R1,R2,...") from None
    if rates and o.get("concurrency"):
        raise ValueError("give either --rate or --concurrency, not both")
    load = VirtualLoad(
        input_len=o["input_len"],
        output_len=o["output_len"],
        rates=rates,
        arrival=o["arrival"],
        burstiness=o["burstiness"],
        step_duration_s=o["duration"],
        concurrency=o.get("concurrency") or (0 if rates else 1),
        requests=o.get("requests") or 0,
        shared_prefix=o.get("shared_prefix") or 0,
        seed=o.get("seed") or 0,
    )
    load.validate()
    return load


_COLUMNS = ("step", "n", "TTFT p50", "p95", "p99", "TPOT p50", "p95", "E2E p50", "req/s", "out tok/s")


def _row(label: str, summary: VirtualSummary) -> list[str]:
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
    load = virtual_load_from_options(o)
    results = run_virtual(load, profile, network)
    click.echo(
        f"virtual run: profile {profile.name}, network {network.name} "
        f"({network.rtt_ms:g} ms RTT), input {load.input_len.text}, output {load.output_len.text}, "
        f"seed {load.seed}"
    )
    table = Table(title="latency in ms", title_justify="left")
    for name in _COLUMNS:
        table.add_column(name, justify="left" if name == "step" else "right")
    steps: list[tuple[str, VirtualSummary]] = []
    for label, step_results in steps_of(load, results):
        summary = summarize_virtual(step_results)
        steps.append((label, summary))
        table.add_row(*_row(label, summary))
    show_table(Console(), table)
    if o.get("out_path"):
        doc = virtual_run_doc(load, profile, network, results, steps)
        Path(o["out_path"]).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        click.echo(f"wrote {o['out_path']}")
