"""The client's TTFT tail and CPU cost at wave boundaries, against a fast truth server, repeated.

    .venv/bin/python benchmarks/client_waves.py [--rounds 3] [--streams 16,64,256] [--waves 8]

A closed loop of N streams whose requests all take the same time ends them in waves: N requests end
together, N records are made and N next requests go out at once. Whatever the client spends per
request end (the turnaround: the end, its record, the user's next send) lands in the next wave's
first tokens, so that is where a client's tail grows. benchmarks/client_tail.py measures the tail
against benchmarks/truth_server.py, whose own reads of a 256-request wave take 15-22 ms and hide
most of both clients' share; this script uses benchmarks/fast_truth_server.py (a bare protocol
that stamps each read and each token write) so only the client's lateness is left:

- whole TTFT error = client TTFT (first token - send) - server TTFT (first write - read), per request;
- CPU per request  = the client process's CPU seconds from the run's start to its last request's end
  (start-up and imports apart, as benchmarks/client_proc.py counts them) / requests; tokenpace's
  analysis after the load (summary, steady state, health) is shown apart, per request too.

Server pinned to core 0, client to core 1 (as benchmarks/accuracy.py); each load runs ``--waves``
waves (N x waves requests) per run, ``--rounds`` rounds, the clients alternating which goes first.
Each client's errors are pooled over its rounds; the P99 difference's 95 % interval resamples whole
runs (a cluster bootstrap: the noise between runs is counted). Verdicts: "at or below" (the
interval's lower bound <= 0: tokenpace's P99 is not shown to be above the raw client's) or "above";
the CPU ratio's interval comes from the same resampling of runs.

When this script and client_tail.py disagree, the server is why: client_tail.py's verdict includes
its server's reading time, this one subtracts it.

    .venv/bin/python benchmarks/client_waves.py --ceiling 128,256,512 --itl-ms 2 --waves 4

climbs the streams of one tokenpace process (no reference client) to find its ceiling: the highest
streams x tokens/s at which the run stays VALID with a TTFT error P99 <= 5 ms after the first wave.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from accuracy import Scenario, _client_run, _cpus
from accuracy_analysis import _join
from client_tail import BOOTSTRAP, cluster_p99_diff

CLIENTS = ("tokenpace", "raw")


def ratio_interval(a: list[float], b: list[float], rng: np.random.Generator) -> tuple[float, float, float]:
    """mean(a) / mean(b) and a 95 % interval resampling runs (each list: one value per run)."""
    point = float(np.mean(a) / np.mean(b))
    xa, xb = np.asarray(a), np.asarray(b)
    ratios = [
        float(xa[rng.integers(0, len(xa), len(xa))].mean() / xb[rng.integers(0, len(xb), len(xb))].mean())
        for _ in range(BOOTSTRAP)
    ]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return point, float(lo), float(hi)


def one_run(
    kind: str, sc: Scenario, workdir: Path, cpus: tuple[int, int]
) -> tuple[np.ndarray, float, float, bool]:
    data, truth = _client_run(kind, sc, workdir, cpus, False, server_script="fast_truth_server.py")
    joined = _join(data["records"], truth)
    if joined.ok != sc.requests or joined.missing:
        raise RuntimeError(
            f"{kind} at {sc.key}: {joined.ok}/{sc.requests} ok, {joined.missing} without truth"
        )
    load, whole = data["load_cpu_s"] / sc.requests, data["cpu_s"] / sc.requests
    return np.asarray(joined.whole), load, whole - load, bool(data.get("valid", True))


def ceiling_run(n: int, waves: int, workdir: Path, cpus: tuple[int, int]) -> dict:
    """One tokenpace run at ``n`` streams: tokens/s, VALID, and its errors after the first wave (the
    first wave's connection set-up is the server's accept queue, the same for any client)."""
    sc = Scenario(f"c{n}", f"closed, {n} streams", n * waves, concurrency=n)
    data, truth = _client_run("tokenpace", sc, workdir, cpus, False, server_script="fast_truth_server.py")
    ok = sorted((r for r in data["records"] if r["status"] == "ok"), key=lambda r: r["sent_ns"])
    whole, delay = [], []
    for r in ok[n:]:
        t, read = truth["truth"][r["request_id"]], truth["read"][r["request_id"]]
        whole.append(((r["token_ns"][0] - r["sent_ns"]) - (t[0] - read)) / 1e6)
        delay.extend((c - w) / 1e6 for c, w in zip(r["token_ns"], t, strict=False))
    tokens = sum(len(r["token_ns"]) for r in ok)
    span_s = (max(r["end_ns"] for r in ok) - min(r["sent_ns"] for r in ok)) / 1e9
    return {
        "streams": n,
        "ok": len(ok),
        "requests": sc.requests,
        "tokens_per_s": tokens / span_s,
        "valid": bool(data.get("valid")),
        "why": "; ".join(data.get("invalid_reasons") or []),
        "ttft_err_p99": float(np.percentile(whole, 99)),
        "delay_p99": float(np.percentile(delay, 99)),
        "cpu_us_per_token": data["load_cpu_s"] / max(tokens, 1) * 1e6,
    }


def ceiling(streams: list[int], waves: int, itl_ms: float, cpus: tuple[int, int]) -> None:
    os.environ["TRUTH_ITL_MS"] = str(itl_ms)  # the fast server's gap between tokens (inherited)
    print("| streams | tokens/s | VALID | TTFT error P99 after the first wave (ms) "
          "| token delivery delay P99 (ms) | client CPU µs/token |\n|---|---|---|---|---|---|")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tp-ceiling-") as tmp:
        for n in streams:
            r = ceiling_run(n, waves, Path(tmp), cpus)
            valid = "yes" if r["valid"] else f"NOT VALID ({r['why']})"
            print(
                f"| {n} | {r['tokens_per_s']:,.0f} | {valid} | {r['ttft_err_p99']:.2f} "
                f"| {r['delay_p99']:.2f} "
                f"| {r['cpu_us_per_token']:.1f} |",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", default="16,64,256")
    ap.add_argument("--waves", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ceiling", help="streams to climb (e.g. 128,256,512,1024): one tokenpace run each")
    ap.add_argument(
        "--itl-ms", type=float, default=10.0, help="with --ceiling: the server's gap between tokens"
    )
    args = ap.parse_args()
    if args.ceiling:
        cpus = _cpus()
        if cpus[0] >= 0:
            os.sched_setaffinity(0, {cpus[0]})
        ceiling([int(x) for x in args.ceiling.split(",")], args.waves, args.itl_ms, cpus)
        return
    if args.rounds < 2:
        sys.exit("client_waves: --rounds must be at least 2 (the interval resamples runs)")
    rng = np.random.default_rng(args.seed)
    cpus = _cpus()
    if cpus[0] >= 0:
        os.sched_setaffinity(0, {cpus[0]})
    rows = []
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tp-waves-") as tmp:
        for n in (int(s) for s in args.streams.split(",")):
            sc = Scenario(f"c{n}", f"closed, {n} streams", n * args.waves, concurrency=n)
            errs: dict[str, list[np.ndarray]] = {k: [] for k in CLIENTS}
            cpu: dict[str, list[float]] = {k: [] for k in CLIENTS}
            analysis: list[float] = []
            invalid = 0
            for r in range(args.rounds):
                for kind in CLIENTS if r % 2 == 0 else CLIENTS[::-1]:
                    e, c, after, valid = one_run(kind, sc, Path(tmp), cpus)
                    errs[kind].append(e)
                    cpu[kind].append(c)
                    if kind == "tokenpace":
                        analysis.append(after)
                    invalid += not valid
                    print(
                        f"[{time.perf_counter() - t0:6.1f}s] {n} streams, round {r + 1}, {kind}: whole TTFT "
                        f"error P50 {np.percentile(e, 50):.2f} P99 {np.percentile(e, 99):.2f} ms, "
                        f"{c * 1e6:.0f} µs CPU/request",
                        file=sys.stderr,
                        flush=True,
                    )
            d, lo, hi = cluster_p99_diff(errs["tokenpace"], errs["raw"], rng)
            ratio = ratio_interval(cpu["tokenpace"], cpu["raw"], rng)
            p99 = {k: float(np.percentile(np.concatenate(v), 99)) for k, v in errs.items()}
            p50 = {k: float(np.percentile(np.concatenate(v), 50)) for k, v in errs.items()}
            per_run = {k: [float(np.percentile(e, 99)) for e in v] for k, v in errs.items()}
            rows.append((n, sc.requests, p50, p99, per_run, (d, lo, hi), cpu, ratio, analysis, invalid))
    load1 = os.getloadavg()[0]
    print(f"\n{args.rounds} rounds, {args.waves} waves per run, load average {load0:.2f} -> {load1:.2f}, "
          f"{time.perf_counter() - t0:.0f} s\n")  # fmt: skip
    print("| streams (requests per run) | whole TTFT error P50 / P99 (ms): tokenpace | raw client "
          "| P99 per run: tokenpace | raw | P99 difference [95 % interval] | CPU µs/request: tokenpace | raw "
          "| CPU ratio [95 % interval] | tokenpace's analysis after the load, µs/request "
          "| NOT VALID runs |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, reqs, p50, p99, per_run, (d, lo, hi), cpu, (r, rlo, rhi), analysis, invalid in rows:
        tail = "at or below" if lo <= 0 else "above"
        runs = {k: ", ".join(f"{x:.1f}" for x in v) for k, v in per_run.items()}
        print(
            f"| {n} ({reqs}) | {p50['tokenpace']:.2f} / {p99['tokenpace']:.2f} "
            f"| {p50['raw']:.2f} / {p99['raw']:.2f} "
            f"| {runs['tokenpace']} | {runs['raw']} | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] ({tail}) "
            f"| {np.mean(cpu['tokenpace']) * 1e6:.0f} | {np.mean(cpu['raw']) * 1e6:.0f} "
            f"| {r:.2f} [{rlo:.2f}, {rhi:.2f}] | {np.mean(analysis) * 1e6:.0f} | {invalid} |"
        )


if __name__ == "__main__":
    main()
