"""`tokenpace sim --virtual`: build the workload from CLI options, run it, print and save the results."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from tokenpace.sim.profile import Network, Profile
from tokenpace.sim.virtual import VirtualResult, run_virtual, summarize
from tokenpace.sim.workload import LengthDist, Workload


def workload_from_options(o: dict[str, Any]) -> Workload:
    rates: tuple[float, ...] = ()
    if o.get("rate"):
        try:
            rates = tuple(float(r) for r in str(o["rate"]).split(","))
        except ValueError:
            raise ValueError(f"bad --rate {o['rate']!r}: use R or a ladder R1,R2,...") from None
    if rates and o.get("concurrency"):
        raise ValueError("give either --rate or --concurrency, not both")
    w = Workload(
        input_len=LengthDist.parse(o["input_len"]),
        output_len=LengthDist.parse(o["output_len"]),
        rates=rates,
        arrival=o["arrival"],
        burstiness=o["burstiness"],
        step_duration_s=o["duration"],
        concurrency=o.get("concurrency") or (0 if rates else 1),
        requests=o.get("requests") or 0,
        shared_prefix=o.get("shared_prefix") or 0,
        seed=o.get("seed") or 0,
    )
    w.validate()
    return w


def _row(label: str, s: dict[str, Any]) -> str:
    if not s.get("n"):
        return f"{label:>10}  {'0':>6}  (no request finished)"
    t, p, e = s["ttft_ms"], s.get("tpot_ms", {}), s["e2e_ms"]
    return (
        f"{label:>10}  {s['n']:>6}  {t['p50']:>9.1f} {t['p95']:>9.1f} {t['p99']:>9.1f}  "
        f"{p.get('p50', float('nan')):>8.2f} {p.get('p95', float('nan')):>8.2f}  {e['p50']:>9.1f}  "
        f"{s['request_throughput']:>7.2f} {s['output_token_throughput']:>9.0f}"
    )


def run_virtual_cli(o: dict[str, Any], profile: Profile, network: Network) -> None:
    w = workload_from_options(o)
    results = run_virtual(w, profile, network)
    click.echo(
        f"virtual run: profile {profile.name}, network {network.name} "
        f"({network.rtt_ms:g} ms RTT), input {o['input_len']}, output {o['output_len']}, "
        f"seed {w.seed}"
    )
    click.echo(
        f"{'step':>10}  {'n':>6}  {'TTFT p50':>9} {'p95':>9} {'p99':>9}  {'TPOT p50':>8} {'p95':>8}  "
        f"{'E2E p50':>9}  {'req/s':>7} {'out tok/s':>9}   (ms)"
    )
    steps: list[dict[str, Any]] = []
    groups: list[tuple[str, list[VirtualResult]]]
    if w.rates:
        groups = [(f"{r:g}/s", [x for x in results if x.step == k]) for k, r in enumerate(w.rates)]
    else:
        groups = [(f"c={w.concurrency}", results)]
    for label, rs in groups:
        s = summarize(rs)
        steps.append({"step": label, **s})
        click.echo(_row(label, s))
    if o.get("out_path"):
        doc = {
            "conditions": {
                "profile": profile.name,
                "network": asdict(network),
                "workload": {
                    "input_len": o["input_len"],
                    "output_len": o["output_len"],
                    "rates": list(w.rates),
                    "arrival": w.arrival,
                    "burstiness": w.burstiness,
                    "step_duration_s": w.step_duration_s,
                    "concurrency": w.concurrency,
                    "requests": w.requests,
                    "shared_prefix": w.shared_prefix,
                    "seed": w.seed,
                },
                "clock": "virtual",
            },
            "steps": steps,
            "requests": [{**asdict(r), "tpot": r.tpot} for r in results],
        }
        Path(o["out_path"]).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        click.echo(f"wrote {o['out_path']}")
