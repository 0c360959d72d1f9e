"""`tokenpace sim --virtual`: options -> VirtualLoad, run it, print one row per step, save the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tokenpace.adapters.results import write_result
from tokenpace.sim.predicted_sweep import predicted_sweep_doc
from tokenpace.sim.profile import Network, Profile
from tokenpace.sim.replicas import run_replicated
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


def _row(label: str, summary: VirtualSummary) -> str:
    s = summary.client
    n = s.counts["ok"]
    if not n:
        return f"{label:>10}  {'0':>6}  (no request finished)"
    t, p, e = s.ttft_ms, s.tpot_ms, s.e2e_ms
    nan = float("nan")
    return (
        f"{label:>10}  {n:>6}  {t.p50:>9.1f} {t.p95:>9.1f} {t.p99:>9.1f}  "
        f"{p.p50 if p.n else nan:>8.2f} {p.p95 if p.n else nan:>8.2f}  {e.p50:>9.1f}  "
        f"{s.request_throughput:>7.2f} {s.output_token_throughput:>9.0f}"
    )


def run_virtual_cli(o: dict[str, Any], profile: Profile, network: Network) -> None:
    load = virtual_load_from_options(o)
    replicas = o.get("replicas") or 1
    results = run_replicated(load, profile, network, replicas)
    if profile.calibrated:
        click.echo(f"predicted: {profile.name} is a calibrated profile ({profile.calibration})")
    click.echo(
        f"virtual run: profile {profile.name}{f' x {replicas} replicas' if replicas > 1 else ''}, "
        f"network {network.name} "
        f"({network.rtt_ms:g} ms RTT), input {load.input_len.text}, output {load.output_len.text}, "
        f"seed {load.seed}"
    )
    click.echo(
        f"{'step':>10}  {'n':>6}  {'TTFT p50':>9} {'p95':>9} {'p99':>9}  {'TPOT p50':>8} {'p95':>8}  "
        f"{'E2E p50':>9}  {'req/s':>7} {'out tok/s':>9}   (ms)"
    )
    steps: list[tuple[str, VirtualSummary]] = []
    per_step = steps_of(load, results)
    for label, step_results in per_step:
        summary = summarize_virtual(step_results)
        steps.append((label, summary))
        click.echo(_row(label, summary))
    if o.get("out_path"):
        doc = virtual_run_doc(load, profile, network, results, steps)
        Path(o["out_path"]).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        click.echo(f"wrote {o['out_path']}")
    if o.get("predicted_sweep"):
        sweep = predicted_sweep_doc(load, profile, network, [r for _, r in per_step], replicas)
        write_result(Path(o["predicted_sweep"]), sweep)
        click.echo(f"wrote {o['predicted_sweep']} (a sweep of predicted steps: tokenpace plan reads it)")
