"""What the gateway's periodic run summary costs at a long run: before (reload every record of the
run and ``summarize`` them, as the store writer did once a minute) and after (the summary kept as
batches are written, ``core.running_summary``: one ``to_dict`` and one ``set_summary``).

A SQLite run store in a temporary folder gets ``--records`` synthetic gateway records (``--tokens``
token timestamps each) in batches of ``--batch``, as the writer appends them. Printed: the time
and the process's peak RSS growth of one periodic summary each way, and the cost of keeping the
running summary per batch. Wall-clock and CPU time on whatever machine runs it: say how loaded.

    .venv/bin/python benchmarks/store_summary.py [--records 100000] [--tokens 64] [--batch 1000]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from tokenpace.adapters.store import connect
from tokenpace.core.metrics import Slo, summarize
from tokenpace.core.record import RequestRecord
from tokenpace.core.running_summary import RunningSummary
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.recording.store_writer import StoreRecordWriter

MS = 1_000_000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def record(i: int, tokens: int) -> RequestRecord:
    sent = (i + 1) * 5 * MS
    ttft = (20 + (i * 7919) % 400) * MS
    stamps = [sent + ttft + k * (5 + (i + k) % 7) * MS for k in range(tokens)]
    return RequestRecord(
        request_id=f"{i:032x}",
        labels={"upstream": "a", "arm": "a", "model": "m", "api": "chat", "outcome": "ok"},
        scheduled_ns=sent,
        dispatched_ns=sent,
        sent_ns=sent,
        headers_ns=sent + ttft // 2,
        first_token_ns=stamps[0],
        first_answer_ns=stamps[0],
        token_ns=stamps,
        end_ns=stamps[-1] + MS,
        output_tokens_counted=tokens,
        output_tokens_server=tokens,
        prompt_tokens=200,
        prompt_chars=800,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    slo = Slo(ttft_ms=300, tpot_ms=10)
    config = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0, slo=slo)
    with tempfile.TemporaryDirectory() as tmp:
        store = connect(str(Path(tmp) / "runs.db"))
        writer = StoreRecordWriter(store, config, "bench", summary_every_s=1e9)  # no periodic summary
        keep_s = 0.0
        for start in range(0, args.records, args.batch):
            batch = [record(i, args.tokens) for i in range(start, min(start + args.batch, args.records))]
            t0 = time.process_time()
            writer([*batch])
            keep_s += time.process_time() - t0  # append + running.add: the append is the same before
        arm = writer.arms["a"]
        t_add = time.process_time()
        probe = [record(i, args.tokens) for i in range(args.batch)]
        for _ in range(10):
            RunningSummary(slo).add(probe)
        add_s = (time.process_time() - t_add) / 10

        rss0, t0 = peak_rss_mb(), time.perf_counter()
        store.set_summary(arm.run_id, arm.running.to_dict())
        after_s, after_mb = time.perf_counter() - t0, peak_rss_mb() - rss0

        rss0, t0 = peak_rss_mb(), time.perf_counter()
        records = store.load_records(arm.run_id)
        summary = summarize(records, slo, with_ci=False).to_dict()
        store.set_summary(arm.run_id, summary)
        before_s, before_mb = time.perf_counter() - t0, peak_rss_mb() - rss0
        t0 = time.perf_counter()
        summarize(records, slo, with_ci=True)
        exact_ci_s = time.perf_counter() - t0
        store.close()
    print(f"{args.records} records of {args.tokens} token timestamps, batches of {args.batch}")
    print(f"before: reload + summarize   {before_s * 1e3:9.1f} ms   peak RSS +{before_mb:.0f} MB")
    print(f"after:  running summary      {after_s * 1e3:9.1f} ms   peak RSS +{after_mb:.0f} MB")
    per = add_s / args.batch * 1e6
    print(f"keeping it: {add_s * 1e3:.1f} ms CPU per batch of {args.batch} ({per:.1f} us a record)")
    print(f"(exact summary with intervals, records loaded: {exact_ci_s * 1e3:.0f} ms)")
    print(f"(appending every batch and keeping the summary: {keep_s:.1f} s CPU)")


if __name__ == "__main__":
    main()
