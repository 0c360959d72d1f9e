"""Gray-release verdicts through the gateway (issue 48): how often `tokenpace arms` goes the wrong way.

Simulated engines of a few slots (`tokenpace sim`, llama-3.1-8b-h100 with a step floor so that each
engine step takes the floor: a candidate with a 15 % higher floor is truly 15 % slower in every step)
and one gateway with a SQLite store, all on 127.0.0.1. Each rollout is a fresh window: open-loop
Poisson traffic at --rate from sticky users (x-user-id, fresh users each rollout), then
`tokenpace arms --json` on that window. Scenarios:
  a  candidate identical to production, 50/50 on equal replicas: ROLL BACK is wrong-way
  b  candidate identical, on its own replica at 5 % (1/19 of production's load): a decided
     "faster" latency row, or PROMOTE, is wrong
  c  candidate truly 15 % slower, 50/50 on equal replicas: PROMOTE is wrong

Run: PYTHONPATH=. python benchmarks/arms_rollouts.py [--rollouts 40] [--scenarios a,b,c]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aiohttp

from tokenpace.gateway.recording.sink import LINGER_S
from tokenpace.sim.profiles.profile import get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.testing.procs import free_port, run_cli, start_service, wait_listening

SLOWER = 1.15
_N = re.compile(
    r"matched load per arm would decide it \(n ([\d,]+) now\)|decided at ([\d,]+) requests at matched"
)


@dataclass
class Tally:
    scenario: str
    verdicts: dict[str, int] = field(default_factory=lambda: {"PROMOTE": 0, "HOLD": 0, "ROLL BACK": 0})
    wrong: int = 0
    n: list[int] = field(default_factory=list)
    n_eff: list[int] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


def _profile(path: Path, floor_ms: float) -> str:
    p = get_profile("llama-3.1-8b-h100").with_overrides(efficiency={"step_floor_ms": floor_ms})
    path.write_text(profile_to_toml(p))
    return str(path)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


@contextmanager
def _fleet(tmp: Path, scenario: str, a: argparse.Namespace) -> Iterator[tuple[str, Path]]:
    """Two engines (production and candidate replicas) and a gateway splitting users between them."""
    fast = _profile(tmp / "fast.toml", a.floor_ms)
    slow = _profile(tmp / "slow.toml", a.floor_ms * SLOWER)
    cand_weight = 5 if scenario == "b" else 50
    engines = {"production": fast, "candidate": slow if scenario == "c" else fast}
    procs, ports = [], {}
    try:
        for n, (arm, prof) in enumerate(engines.items()):
            ports[arm] = free_port()
            argv = ["sim", "--port", str(ports[arm]), "--profile", prof, "--seed", str(n)]
            procs.append(start_service(*argv, "--max-num-seqs", str(a.slots)))
            wait_listening(ports[arm], procs[-1])
        port, admin, db = free_port(), free_port(), tmp / f"runs-{scenario}.db"
        ups = "".join(
            f'\n[[upstream]]\nname = "{arm}"\nurl = "http://127.0.0.1:{ports[arm]}/v1"\n'
            f"weight = {100 - cand_weight if arm == 'production' else cand_weight}\n"
            for arm in engines
        )
        (tmp / "gw.toml").write_text(
            f'listen = "127.0.0.1:{port}"\nadmin-listen = "127.0.0.1:{admin}"\nstore = "{db}"\n{ups}'
        )
        procs.append(start_service("gateway", "--config", str(tmp / "gw.toml")))
        wait_listening(port, procs[-1])
        yield f"http://127.0.0.1:{port}", db
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


async def _traffic(url: str, prefix: str, a: argparse.Namespace, seed: int) -> int:
    """Open-loop Poisson arrivals at a.rate; each request from a user drawn from a.users (sticky)."""
    rng = random.Random(seed)
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": a.out_tokens,
        "stream": True,
    }
    ok = 0

    async def one(s: aiohttp.ClientSession, user: str) -> None:
        nonlocal ok
        async with s.post(url + "/v1/chat/completions", json=body, headers={"x-user-id": user}) as r:
            await r.read()
            ok += r.status == 200

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        tasks, t = [], time.monotonic()
        for _ in range(a.requests):
            t += rng.expovariate(a.rate)
            await asyncio.sleep(max(0.0, t - time.monotonic()))
            user = f"{prefix}-u{rng.randrange(a.users)}"
            tasks.append(asyncio.create_task(one(s, user)))
        await asyncio.gather(*tasks)
    return ok


def _matched_n(report: dict[str, Any]) -> int | None:
    """The effective requests per arm at matched load that the guards were judged on (Kish)."""
    for g in report.get("guards", []):
        m = _N.search(g.get("reason", ""))
        if m:
            return int((m.group(1) or m.group(2)).replace(",", ""))
    return None


def _judge(scenario: str, report: dict[str, Any]) -> tuple[str, bool]:
    verdict = str(report.get("verdict"))
    verdict = verdict.upper().replace("_", " ")
    if scenario == "a":
        return verdict, verdict == "ROLL BACK"
    if scenario == "c":
        return verdict, verdict == "PROMOTE"
    faster = any(row.get("verdict") == "faster" for row in _rows(report))
    return verdict, faster or verdict == "PROMOTE"


def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison row in the report (the latency comparison's rows, wherever they sit)."""
    out: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "verdict" in x and "metric" in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(report)
    return out


def run_scenario(scenario: str, a: argparse.Namespace) -> Tally:
    tally = Tally(scenario)
    with tempfile.TemporaryDirectory() as d, _fleet(Path(d), scenario, a) as (url, db):
        for i in range(a.rollouts):
            t0 = time.time()
            asyncio.run(_traffic(url, f"{scenario}{i}", a, seed=1000 * ord(scenario) + i))
            time.sleep(LINGER_S + 0.5)  # the gateway's writer batches records for up to LINGER_S
            t1 = time.time()
            window = ["--store", str(db), "--since", _iso(t0), "--until", _iso(t1)]
            judging = ["--guard", a.guard, "--resamples", str(a.resamples), "--seed", str(i)]
            done = run_cli("arms", *window, *judging, "--json", timeout=300)
            try:
                report = json.loads(done.stdout)
            except ValueError:
                print(done.stdout, done.stderr, file=sys.stderr)
                raise
            verdict, wrong = _judge(scenario, report)
            cand = [x for x in report.get("arms", []) if x["arm"] == "candidate"]
            tally.n.append(cand[0]["requests"] if cand else 0)
            if (eff := _matched_n(report)) is not None:
                tally.n_eff.append(eff)
            tally.verdicts[verdict] = tally.verdicts.get(verdict, 0) + 1
            tally.wrong += wrong
            if wrong:
                tally.failures.append(report)
            print(f"{scenario} {i}: {verdict}{' WRONG' if wrong else ''}", file=sys.stderr, flush=True)
            if a.dump:
                Path(a.dump, f"{scenario}-{i}.json").write_text(json.dumps(report, indent=1))
    return tally


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="a,b,c")
    p.add_argument("--rollouts", type=int, default=40, help="rollouts per scenario")
    p.add_argument("--requests", type=int, default=200, help="requests per rollout")
    p.add_argument("--rate", type=float, default=40.0, help="requests/s through the gateway")
    p.add_argument("--users", type=int, default=150, help="users per rollout")
    p.add_argument("--slots", type=int, default=4, help="each engine's --max-num-seqs")
    p.add_argument("--floor-ms", type=float, default=15.0, help="each engine step's duration")
    p.add_argument("--out-tokens", type=int, default=6)
    p.add_argument("--guard", default="ttft.p95=+10%,e2e.p50=+10%")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--dump", help="a folder for each rollout's arms JSON")
    a = p.parse_args()
    if a.dump:
        Path(a.dump).mkdir(parents=True, exist_ok=True)
    for s in a.scenarios.split(","):
        t = run_scenario(s, a)
        row = {"scenario": s, "rollouts": a.rollouts, **t.verdicts, "wrong": t.wrong}
        row["median_n"] = statistics.median(t.n) if t.n else None
        row["median_n_eff"] = statistics.median(t.n_eff) if t.n_eff else None
        row["n_eff_known"] = len(t.n_eff)
        print(json.dumps(row), flush=True)
        for report in t.failures:  # each wrong-way verdict's own reason, to look into
            print(f"wrong-way ({s}): {report.get('reason')}", file=sys.stderr)


if __name__ == "__main__":
    main()
