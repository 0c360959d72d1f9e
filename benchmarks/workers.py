"""Load from 1 and 2 worker processes (`tokenpace bench --workers N`) against the truth server.

    .venv/bin/python benchmarks/workers.py              # ~1-2 min on 2 cores; prints the table
    .venv/bin/python benchmarks/workers.py --write-md   # ... and rewrites the table in BENCHMARKS.md
    .venv/bin/python benchmarks/workers.py --quick      # fewer requests, a smoke run

Each run starts a fresh truth server (benchmarks/truth_server.py: TTFT 50 ms, one token chunk per
10 ms, 64 chunks, every chunk stamped with the server's perf_counter_ns) pinned to core 0, then runs
the real command line, `tokenpace bench --url URL --workers N ...`, and joins its records file with
the server's truth (benchmarks/accuracy.py: TTFT error = client first-token stamp - server send
time of the first chunk). Clients:

- `1 process`: `--workers 1`, the process pinned to core 1 (the accuracy benchmark's set-up);
- `2 workers, cores 0+1`: `--workers 2`, the workers pinned to cores 0 and 1 — worker 0 shares
  core 0 with the server;
- `2 workers, core 1`: `--workers 2` with the whole command confined to core 1 (both workers on one
  core: the cost of splitting the load without a core to gain);
- `2 Ray actors`: `--workers 2 --ray auto`, a local Ray cluster started for the run (needs
  `pip install 'tokenpace[ray]'`; left out with `--clients w1,w2,w2c1`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
from accuracy import TruthServer, _wait_rusage
from accuracy_analysis import analyze
from accuracy_report import MD_PATH, _f, machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MD_START, MD_END = "<!-- workers:start -->", "<!-- workers:end -->"

SCENARIOS = {  # key: (label, requests, requests in --quick, load flags)
    "c64": ("closed, 64 streams", 384, 128, ["--concurrency", "64"]),
    "p600": ("Poisson 600 req/s, no cap", 1800, 600, ["--rate", "600", "--arrival", "poisson"]),
    "p900": ("Poisson 900 req/s, no cap", 2700, 900, ["--rate", "900", "--arrival", "poisson"]),
}
CLIENTS = {  # key: (label, --workers, core the whole command is confined to, or None, extra flags)
    "w1": ("1 process (core 1)", 1, 1, []),
    "w2": ("2 workers (cores 0+1)", 2, None, []),
    "w2c1": ("2 workers (both on core 1)", 2, 1, []),
    "ray2": ("2 Ray actors (local cluster)", 2, None, ["--ray", "auto"]),
}


def run_one(scenario: str, client: str, workdir: Path, quick: bool) -> dict:
    label, full, small, load = SCENARIOS[scenario]
    _, workers, cpu, extra = CLIENTS[client]
    out = workdir / f"{scenario}-{client}.json"
    with TruthServer(workdir, 0, f"{scenario}-{client}") as server:
        cmd = [sys.executable, "-m", "tokenpace", "bench", "--url", server.url, "--model", "m",
               "--workers", str(workers), *load, "--requests", str(small if quick else full),
               "--input-len", "64", "--output-len", "64", "--timeout", "120s", "--server-metrics", "off",
               "--request-id-prefix", f"{scenario}-{client}-", "--out", str(out),
               "--no-store", "-q", *extra]  # fmt: skip

        def pin() -> None:
            if cpu is not None and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {cpu})

        proc = subprocess.Popen(cmd, cwd=ROOT, preexec_fn=pin, stdout=subprocess.DEVNULL)
        rc, ru, wall = _wait_rusage(proc, timeout_s=180)
        truth = server.stop()
    if rc not in (0, 1, 3, 4):  # 3: NOT VALID, 4: no success: results to report, not failures
        raise RuntimeError(f"{scenario}/{client}: tokenpace bench exited {rc}")
    result = json.loads(out.read_text())
    records = [orjson.loads(line) for line in out.with_suffix(".records.jsonl").read_bytes().splitlines()]
    client_health = result["summary"]["client"]
    data = {
        "kind": "tokenpace",
        "records": records,
        "health": client_health,
        "valid": result["valid"],
        "invalid_reasons": result["invalid_reasons"],
        "reported": {},
        "cpu_s": ru.ru_utime + ru.ru_stime,  # the command and its workers, start-up included
        "wall_s": wall,
        "max_rss_mb": ru.ru_maxrss / 1024,
        "process": {},
    }
    row = analyze(data, truth)
    row["workers"] = result["conditions"].get("workers", {"count": 1})
    row["per_worker"] = [
        {"requests": w["requests"], "loop_lag_p99_ms": (w["health"] or {}).get("loop_lag_ms", {}).get("p99"),
         "cpu_fraction": (w["health"] or {}).get("cpu_fraction")}
        for w in client_health.get("workers", [])
    ]  # fmt: skip
    row["scenario"], row["client"] = label, CLIENTS[client][0]
    row["command_wall_s"] = wall  # start-up (processes, Ray cluster and actors) + run + summary
    row["clock"] = row["workers"].get("clock")
    return row


def table(rows: list[dict], info: dict) -> str:
    lines = [
        f"Measured {info['date']} on {info['nproc']} cores ({info['cpu_model']}), Python {info['python']}, "
        f"tokenpace at {info['commit']}; load average before {info['loadavg_before'][0]:.2f} (1 min).",
        "",
        "| scenario | client | ok/sent | token chunks/s | TTFT err P50 / P99 (ms) "
        "| ITL \\|err\\| P50 / P99 (ms) | loop lag P99, worst worker (ms) | dispatch lag P99 (ms) "
        "| CPU µs/chunk (streaming) "
        "| server late P99 (ms) | command wall (s) | tokenpace's verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "valid" if r["valid"] else "**not valid**: " + "; ".join(r["invalid_reasons"])[:160]
        lines.append(
            f"| {r['scenario']} | {r['client']} | {r['ok']}/{r['sent']} | {r['tokens_per_s']:.0f} "
            f"| {_f(r['ttft_err_ms']['p50'])} / {_f(r['ttft_err_ms']['p99'])} "
            f"| {_f(r['itl_abs_err_ms']['p50'])} / {_f(r['itl_abs_err_ms']['p99'])} "
            f"| {_f(r['loop_lag_ms']['p99'])} | {_f(r['dispatch_lag_ms']['p99'])} "
            f"| {_f(r['health_cpu_us_per_chunk'], 0)} | {_f(r['server_gap_late_ms']['p99'], 1)} "
            f"| {r['command_wall_s']:.1f} | {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SCENARIOS), help="scenarios: " + ",".join(SCENARIOS))
    ap.add_argument("--clients", default=",".join(CLIENTS), help="clients: " + ",".join(CLIENTS))
    ap.add_argument("--write-md", action="store_true", help="rewrite the table in BENCHMARKS.md")
    args = ap.parse_args()
    info = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tp-workers-") as tmp:
        for scenario in args.only.split(","):
            for client in args.clients.split(","):
                rows.append(run_one(scenario, client, Path(tmp), args.quick))
                done = rows[-1]
                print(f"{scenario} {client}: {done['tokens_per_s']:.0f} chunks/s, valid={done['valid']}",
                      file=sys.stderr)  # fmt: skip
    text = table(rows, info)
    print(text)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "workers.json").write_bytes(orjson.dumps({"machine": info, "rows": rows}, default=str))
    if args.write_md:
        md = MD_PATH.read_text()
        start, end = md.index(MD_START) + len(MD_START), md.index(MD_END)
        MD_PATH.write_text(md[:start] + "\n" + text + "\n" + md[end:])


if __name__ == "__main__":
    main()
