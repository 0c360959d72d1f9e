"""How fast the web console's pages answer over a large store (`tokenpace ui`).

Builds (once; reused when the file is there) a SQLite store of ``--runs`` runs holding ``--records``
records in all: a nightly test and nine others, labels, a NOT VALID run in 50, a baseline and a
repeat group, each run's records drawn from one of a few prepared sets (so that building costs the
store's writes, not the drawing). The runs, their labels and their stored figures go through the
store's own ``save_run`` and ``save_levels``; the records are bulk-inserted beside them as the rows
``save_run`` writes (10 million in minutes, not hours). A sweep and a gateway session (through the
gateway's store writer; each record with the requests in flight on its upstream, the same load on
both arms, so that arms compares them at matched load as a current gateway's) are added when
missing. Then serves the console in this process (aiohttp's
test server on 127.0.0.1) and asks each page and its JSON twin ``--repeats`` times after a first:
printed the first answer's wall and CPU time, the repeats' median and P95, their median CPU time
(what an answer costs whatever else the host runs) and the answer's size.

Compare answers from the runs' stored figures; ``exact=1`` runs the same bootstrap as ``tokenpace
compare`` (seconds). Repeats of compare, history and a rollout are answered from the console's
cache; the rollout's guards after its first view reuse that view's read of the session, the last
path (a window of its own) reads it afresh. ``--only /rollouts/``: only the pages whose path holds
it (after the store is built).

    .venv/bin/python benchmarks/ui_pages.py --store /tmp/ui-10m.db [--runs 10000] [--records 10000000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from aiohttp.test_utils import TestClient, TestServer

from tokenpace.adapters.store import Store, connect
from tokenpace.app.console.server import build_app, start_up
from tokenpace.core.analysis.comparison.stored_levels import RunLevel, run_levels
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.recording.store_writer import StoreRecordWriter

TESTS = 10  # distinct tests (concurrency levels)
SETS = 8  # prepared record sets per test


def _record(i: int, ttft_ms: float, itl_ms: float, tokens: int) -> RequestRecord:
    sent = 1_000_000_000 + i * 5_000_000
    first = sent + round(ttft_ms * 1e6)
    chunks = [first + round(k * itl_ms * 1e6) for k in range(tokens)]
    return RequestRecord(
        request_id=f"r{i}", index=i, warmup=False, scheduled_ns=sent, dispatched_ns=sent, sent_ns=sent,
        first_token_ns=first, token_ns=chunks, end_ns=chunks[-1], output_tokens_counted=tokens,
        status=Status.OK,
    )  # fmt: skip


def _sets(per_run: int, seed: int) -> dict[tuple[int, int], RecordSet]:
    rng = np.random.default_rng(seed)
    sets = {}
    for t in range(TESTS):
        for s in range(SETS):
            speed = 1.0 + 0.1 * t + (0.3 if s >= SETS // 2 else 0.0)  # half the sets: a slower server
            recs = [
                _record(i, 80 * speed * rng.lognormal(0, 0.2), 12 * speed * rng.lognormal(0, 0.1), 16)
                for i in range(per_run)
            ]
            rows = [
                (i, r.request_id, r.status.value, int(r.warmup), orjson.dumps(r.to_dict()).decode())
                for i, r in enumerate(recs)
            ]  # the records table's rows, as save_run writes them (less the run id)
            sets[t, s] = RecordSet(summarize(recs).to_dict(), run_levels(recs), rows)
    return sets


@dataclass
class RecordSet:
    summary: dict[str, Any]
    levels: list[RunLevel]  # what saving a run stores of it (app/baseline/store_ops.save_result)
    rows: list[tuple[int, str, str, int, str]]


def build(path: Path, runs: int, records: int, seed: int = 0) -> None:
    """Runs (their rows, labels and stored figures) through the store's own methods; records bulk
    inserted beside them as the rows ``save_run`` writes (the same JSON), journal off: building
    10 million records through ``save_run`` would take hours on a small host, and the pages read
    the table, not how it was filled."""
    per_run = max(1, records // runs)
    sets = _sets(per_run, seed)
    started = time.perf_counter()
    store = connect(f"sqlite:///{path}")
    chosen = []
    for n in range(runs):
        t, day = n % TESTS, n // TESTS
        chosen.append(sets[t, (day * SETS // max(1, runs // TESTS)) % SETS])
        conditions = {
            "model": "bench-model", "endpoint": "http://127.0.0.1:9/v1", "api": "openai-chat",
            "load": {"mode": "closed_loop", "concurrency": 2 ** (t % 8) * (1 + t // 8), "requests": per_run},
            "workload": {"input_len": {"spec": "512"}, "output_len": {"spec": "16"}},
        }  # fmt: skip
        unix = 1_767_225_600 + n * 600  # ten minutes apart
        conditions["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(unix))
        labels = {"test": f"t{t}", "version": f"1.{day // 100}", "team": "bench"}
        store.save_run(
            f"run{n:06d}", conditions, chosen[-1].summary, [], labels=labels, valid=n % 50 != 7,
            extra={} if n % 50 != 7 else {"invalid_reasons": ["the client fell behind"]},
        )  # fmt: skip
        store.save_levels(f"run{n:06d}", chosen[-1].levels)
    store.set_baseline("prod", f"run{TESTS * 10:06d}")
    store.save_repeat_group(
        "grp", [f"run{runs - TESTS * i - 1:06d}" for i in range(3)], {}, "bench-model", []
    )
    store.close()
    print(f"  built {runs:,} runs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    for n, chosen_set in enumerate(chosen):
        run_id = f"run{n:06d}"
        db.executemany(
            "INSERT INTO records (run_id, seq, request_id, status, warmup, data) VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, *row) for row in chosen_set.rows],
        )
        if n % 100 == 99:
            db.commit()
        if n % 1000 == 999:
            took = time.perf_counter() - started
            print(f"  {n + 1:,} runs' records, {(n + 1) * per_run:,} in {took:.0f} s", file=sys.stderr)
    db.execute("UPDATE runs SET record_count = ?", (per_run,))
    db.commit()
    db.close()


SWEEP = "bench-sweep"  # eight steps of a saturating server, 1,000 records each
SESSION = "bench-gw"  # a gateway session: two arms, ARM_RECORDS records each


def add_sweep_and_session(store: Store, arm_records: int, seed: int = 1) -> None:
    """A sweep through ``save_run`` and a gateway session through the gateway's own store writer
    (as ``tokenpace gateway`` stores it), when the store has none yet."""
    if store.list_runs({"kind": "sweep"}, limit=1):
        return
    rng = np.random.default_rng(seed)
    for n, c in enumerate((1, 2, 4, 8, 16, 32, 64, 128), start=1):
        ttft = 80.0 * (1 + (c / 24) ** 2)
        recs = [
            _record(i, ttft * rng.lognormal(0, 0.1), 12 * rng.lognormal(0, 0.05), 16) for i in range(1000)
        ]
        rps = c / ((ttft + 200) / 1000)  # Little's law: each request about TTFT + 200 ms
        summary = summarize(recs).to_dict() | {"request_throughput": rps, "window_s": 60.0}
        conditions = {
            "model": "bench-model", "endpoint": "http://127.0.0.1:9/v1", "api": "openai-chat",
            "load": {"mode": "closed_loop", "concurrency": c, "requests": 1000}, "slo": {"ttft_ms": 300.0},
            "started_at": f"2026-06-01T00:{n:02d}:00+00:00",
        }  # fmt: skip
        labels = {"sweep_id": SWEEP, "sweep_step": str(n)}
        store.save_run(f"{SWEEP}-{n:02d}", conditions, summary, recs, kind="sweep", labels=labels)
    ups = (parse_upstream("a=http://127.0.0.1:9,weight=90"), parse_upstream("b=http://127.0.0.1:9,weight=10"))
    writer = StoreRecordWriter(store, GatewayConfig(upstreams=ups, port=0), SESSION)
    span_ns = arm_records * 100_000_000 + 1_000_000_000  # the session began this long ago
    writer.started -= timedelta(microseconds=span_ns // 1000)
    writer.anchor = {k: v - span_ns for k, v in writer.anchor.items()}
    base = writer.anchor["perf_ns"]
    for arm, slower in (("a", 1.0), ("b", 1.1)):
        recs = []
        for i in range(arm_records):
            r = _record(i, 80 * slower * rng.lognormal(0, 0.2), 12 * rng.lognormal(0, 0.1), 16)
            shift = base + i * 100_000_000 - r.sent_ns
            recs.append(
                dataclasses.replace(
                    r, request_id=f"{arm}{i}", scheduled_ns=r.scheduled_ns + shift,
                    dispatched_ns=r.sent_ns + shift,
                    sent_ns=r.sent_ns + shift, first_token_ns=(r.first_token_ns or 0) + shift,
                    token_ns=[x + shift for x in r.token_ns], end_ns=(r.end_ns or 0) + shift,
                    labels={"upstream": arm, "arm": arm, "config_epoch": "0"},
                    upstream_inflight=int(rng.poisson(3)),  # the same load: compared at matched load
                )
            )  # fmt: skip
        for start in range(0, len(recs), 1000):
            writer(list(recs[start : start + 1000]))
    writer.finish()


Result = tuple[str, float, float, list[float], list[float], int]


async def measure(store: Store, paths: list[str], repeats: int) -> list[Result]:
    """Per page: the first answer's wall time, the repeats' wall and CPU times (this process's, the
    server's threads included: what the answer costs whatever else the host runs), its size."""
    out = []
    async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
        for path in paths:
            times, cpu, size = [], [], 0
            for _ in range(repeats + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                resp = await client.get(path)
                body = await resp.read()
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                assert resp.status == 200, (path, resp.status, body[:300])
                size = len(body)
            out.append((path, times[0], cpu[0], times[1:], cpu[1:], size))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=Path("/tmp/ui-bench.db"))
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--arm-records", type=int, default=2000, help="records of each gateway arm")
    ap.add_argument("--only", default="", help="only the pages whose path holds this, e.g. /rollouts/")
    args = ap.parse_args()
    if not args.store.exists():
        t0 = time.perf_counter()
        build(args.store, args.runs, args.records)
        took = time.perf_counter() - t0
        size = os.path.getsize(args.store)
        print(
            f"built {args.runs:,} runs, {args.records:,} records in {took:.0f} s "
            f"({took / max(1, args.records) * 1e6:.1f} us a record); {size / 1e9:.2f} GB "
            f"({size / max(1, args.records):.0f} bytes a record)"
        )
    store = connect(f"sqlite:///{args.store}")
    add_sweep_and_session(store, args.arm_records)
    newest = store.list_runs({"kind": "bench"}, limit=1)[0].id
    n = int(newest[3:])
    # the newest three runs of the newest run's test form a repeat group: compare the runs before them
    b, a1, a2 = (f"run{n - k * TESTS:06d}" for k in (3, 4, 5))
    paths = [
        "/runs", "/api/runs", "/runs?label=test=t3&valid=yes", "/runs?cond=load.concurrency=8",
        "/runs?page=150", f"/runs/{newest}", f"/api/runs/{newest}", f"/history?run={newest}",
        f"/api/history?run={newest}", "/history?label=test=t3&metric=e2e.p99",
        f"/compare?a={a1}&b={b}", f"/api/compare?a={a2}&b={b}", f"/compare?a={a1}&b={b}&exact=1",
        "/sweeps", f"/sweeps/{SWEEP}?peak=50", "/rollouts", f"/rollouts/{SESSION}",
        f"/api/rollouts/{SESSION}?guard=ttft.p95=%2B10%25", f"/rollouts/{SESSION}?guard=ttft.p95=%2B20%25",
        # a guard's link opened cold: a window of its own, so the session is read afresh
        f"/rollouts/{SESSION}?guard=e2e.p99=%2B10%25&since=2020-01-01",
    ]  # fmt: skip
    paths = [p for p in paths if args.only in p]
    start_up()  # as `tokenpace ui` does before it listens
    results = asyncio.run(measure(store, paths, args.repeats))
    print(f"\n{'page':<44} {'first':>7} {'cpu':>7} {'median':>7} {'p95':>7} {'cpu':>7} {'bytes':>9}")
    for path, first, first_cpu, times, cpu, size in results:
        q = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        med = statistics.median(times)
        mid = statistics.median(cpu)
        print(f"{path[:44]:<44} {first:7.0f} {first_cpu:7.0f} {med:7.0f} {q:7.0f} {mid:7.0f} {size:9,}")
    load = os.getloadavg()[0]
    print(f"(ms; {args.repeats} repeats after the first; host: {os.cpu_count()} CPUs, load {load:.1f})")
    store.close()


if __name__ == "__main__":
    main()
