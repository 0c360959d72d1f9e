"""How fast the web console's pages answer over a large store (`tokenpace ui`).

Builds (once; reused when the file is there) a SQLite store of ``--runs`` runs holding ``--records``
records in all, through the store's own ``save_run``: a nightly test and nine others, labels,
a NOT VALID run in 50, baselines and repeat groups, each run's records drawn from one of a few
prepared sets (so that building costs the store's writes, not the drawing). Then serves the console
in this process (aiohttp's test server on 127.0.0.1) and asks each page and its JSON twin
``--repeats`` times: printed the first answer's time, the repeats' median and P95, the CPU time
of an answer (median; what it costs whatever else the host runs) and the answer's size.

The compare page runs the same bootstrap as ``tokenpace compare`` (seconds); its first answer is
shown apart from its repeats, which are answered from the console's cache.

    .venv/bin/python benchmarks/ui_pages.py --store /tmp/ui-bench.db [--runs 10000] [--records 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from aiohttp.test_utils import TestClient, TestServer

from tokenpace.adapters.store import Store, connect
from tokenpace.app.console.server import build_app
from tokenpace.core.analysis.comparison.stored_levels import RunLevel, run_levels
from tokenpace.core.metrics import summarize
from tokenpace.core.record import RequestRecord, Status

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


Result = tuple[str, float, list[float], list[float], int]


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
            out.append((path, times[0], times[1:], cpu[1:], size))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=Path("/tmp/ui-bench.db"))
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=10)
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
    newest = store.list_runs(limit=1)[0].id
    n = int(newest[3:])
    older = f"run{n - TESTS:06d}"
    paths = [
        "/runs", "/api/runs", "/runs?label=test=t3&valid=yes", "/runs?cond=load.concurrency=8",
        "/runs?page=150", f"/runs/{newest}", f"/api/runs/{newest}", f"/history?run={newest}",
        f"/api/history?run={newest}", "/history?label=test=t3&metric=e2e.p99",
        f"/compare?a={older}&b={newest}", f"/api/compare?a={older}&b={newest}",
    ]  # fmt: skip
    results = asyncio.run(measure(store, paths, args.repeats))
    print(f"\n{'page':<44} {'first':>7} {'median':>7} {'p95':>7} {'cpu':>7} {'bytes':>9}")
    for path, first, times, cpu, size in results:
        q = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        med = statistics.median(times)
        print(f"{path[:44]:<44} {first:7.0f} {med:7.0f} {q:7.0f} {statistics.median(cpu):7.0f} {size:9,}")
    load = os.getloadavg()[0]
    print(f"(ms; {args.repeats} repeats after the first; host: {os.cpu_count()} CPUs, load {load:.1f})")
    store.close()


if __name__ == "__main__":
    main()
