"""Capacity verdicts on a quiet but noisy host: is a server without a capacity limit ever called
saturated, and is a real knee (a slot limit) found, sweep after sweep?

    python benchmarks/capacity_noise.py [--sweeps 10] [--jitter 0.03] [--period 1] [--seed 1]

The scripted server (tokenpace.testing) plays the host: its speed changes every ``--period`` seconds
by a factor drawn from 1 +- ``--jitter`` (each sweep its own draws). Two sweeps per trial, both
with the revisit:
- no capacity limit (10 ms to the first token, 2 ms a token): open-loop rates 5, 10, 20, 40 req/s,
  60 requests a step. A step called *overloaded* (saturated) or a drift verdict is a false alarm;
- two slots (the same timing): concurrency 1, 2, 4, 8, 16, 80 requests a step. Past 2 users requests
  wait for a slot: the knee is at 2 users. Found: the plan has a knee (and no drift verdict took it).
The table: per trial kind, how many sweeps gave each verdict. Client health is not judged (the
server shares the client's cores); everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.sweep.sweep import Sweep, SweepConfig
from tokenpace.app.watch import health
from tokenpace.core.analysis.diagnosis.client_stalls import stall_impact
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.testing.scripted_timing import Behaviour

SCRIPT = Script(ttft_s=0.01, itl_s=0.002)
MAX_SWEEPS = 100  # each sweep is ~15 s of traffic
USERS = (1, 2, 4, 8, 16)  # the slotted server's steps


def _unstalled(stalls: Any, records: Any, tolerance: float, dropped: int) -> Any:
    return stall_impact({}, records, tolerance, 0)


def lenient_health() -> None:
    for name, value in (
        ("LOOP_LAG_P99_LIMIT_MS", 1e6),
        ("DISPATCH_LAG_P99_LIMIT_MS", 1e6),
        ("CPU_LIMIT", 1e6),
    ):
        setattr(health, name, value)
    health.stall_impact = _unstalled  # type: ignore[attr-defined]  # the client's stalls placed on no request


async def sweep(
    behaviour: Behaviour, mode: str, steps: list[float], requests: int, seed: int
) -> dict[str, Any]:
    async with ScriptedServer(SCRIPT, behaviour=behaviour) as srv:
        base = BenchConfig(
            url=srv.url, model="m", input_len=parse_length("16"), output_len=parse_length("4"),
            requests=requests, timeout_s=10.0, seed=seed, server_metrics="off",
        )  # fmt: skip
        cfg = SweepConfig(base=base, mode=mode, steps=steps, keep_going=True, peak_rps=100)
        return (await Sweep(cfg, f"noise{seed}").run()).to_dict()


def unlimited(jitter: float, period: float, seed: int) -> dict[str, Any]:
    b = Behaviour(speed_jitter=jitter, speed_period_s=period, speed_seed=seed)
    return asyncio.run(sweep(b, "rate", [5, 10, 20, 40], 60, seed))


def slotted(jitter: float, period: float, seed: int) -> dict[str, Any]:
    b = Behaviour(slots=2, speed_jitter=jitter, speed_period_s=period, speed_seed=seed)
    return asyncio.run(sweep(b, "concurrency", [float(u) for u in USERS], 80, seed))


def verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    a = doc["analysis"]
    return {
        "overloaded": [s["step"] for s in a["littles_law"]["steps"] if s["status"] == "overloaded"],
        "drift": a["drift"]["latency_moved_with_time"],
        "knee_step": (a["knee"] or {}).get("step"),
        "used": a["used_steps"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--jitter", type=float, default=0.03)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.sweeps <= MAX_SWEEPS:
        ap.error(f"--sweeps must be 1 to {MAX_SWEEPS}")
    if not 0 <= args.jitter < 1 or args.period <= 0:
        ap.error("--jitter must be 0 to below 1 and --period positive")
    lenient_health()
    free = [verdicts(unlimited(args.jitter, args.period, args.seed + i)) for i in range(args.sweeps)]
    slots = [verdicts(slotted(args.jitter, args.period, args.seed + i)) for i in range(args.sweeps)]
    for kind, rows in (("no limit", free), ("2 slots", slots)):
        for r in rows:
            print(kind, r)
    n = args.sweeps
    print()
    print(f"+-{args.jitter:.0%} speed every {args.period:g} s, {n} sweeps each")
    print()
    print("| server | sweeps | a step called saturated | drift declared | knee found (at users: sweeps) |")
    print("|---|---|---|---|---|")
    for kind, rows in (("no capacity limit", free), ("2 slots", slots)):
        sat = sum(bool(r["overloaded"]) for r in rows)
        drift = sum(r["drift"] for r in rows)
        knees = Counter(
            USERS[r["knee_step"] - 1] for r in rows if r["knee_step"] is not None and kind == "2 slots"
        )
        where = ", ".join(f"{u}: {k}" for u, k in sorted(knees.items()))
        knee = sum(r["knee_step"] is not None for r in rows)
        print(f"| {kind} | {n} | {sat} | {drift} | {knee}{f' ({where})' if where else ''} |")


if __name__ == "__main__":
    main()
