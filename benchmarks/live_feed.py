"""What a run's live figures cost, per second of the run (the worker thread's fold and store write).

    python benchmarks/live_feed.py [--rates 100,1000,10000] [--tokens 64] [--repeats 5]

For each request rate R, one second's R records (``--tokens`` token timestamps each, as a streamed
answer has) are folded into ``core.live_figures.LiveFigures`` and the snapshot written to a SQLite
store's ``live_runs`` row, as ``app/watch/live.py`` does once a second in its worker thread. The fold
holds the GIL (Python over the records), so its time is what the measuring event loop can lose per
second; the store write is mostly I/O (SQLite releases the GIL). Prints the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tokenpace.adapters.store import connect
from tokenpace.core.analysis.diagnosis.live_figures import ClientNow, LiveFigures
from tokenpace.core.record import RequestRecord, Status

MS = 1_000_000


def records(n: int, tokens: int, offset: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = (offset + i) * MS
        first = sent + (50 + i % 37) * MS
        toks = [first + k * 8 * MS for k in range(tokens)]
        out.append(
            RequestRecord(
                f"r{offset + i}", scheduled_ns=sent, dispatched_ns=sent, sent_ns=sent, first_token_ns=first,
                token_ns=toks, output_tokens_counted=tokens, end_ns=toks[-1], status=Status.OK,
            )
        )  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rates", default="100,1000,10000")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    store = connect(str(Path(tempfile.mkdtemp()) / "runs.db"))
    store.start_live("bench-live", "bench", {})
    print("| requests/s | fold, ms per second | store write, ms per second | snapshot bytes |")
    print("|---|---|---|---|")
    for rate in (int(r) for r in args.rates.split(",")):
        figures = LiveFigures()
        folds, writes = [], []
        size = 0
        for second in range(args.repeats):
            batch = records(rate, args.tokens, second * rate)
            t0 = time.perf_counter()
            snapshot = figures.fold(batch, float(second + 1), ClientNow(in_flight=8, loop_lag_ms=0.1))
            t1 = time.perf_counter()
            doc = snapshot.to_dict()
            store.publish_live("bench-live", doc)
            t2 = time.perf_counter()
            folds.append((t1 - t0) * 1000)
            writes.append((t2 - t1) * 1000)
            size = len(str(doc))
        print(f"| {rate:,} | {statistics.median(folds):.2f} | {statistics.median(writes):.2f} | {size:,} |")


if __name__ == "__main__":
    main()
