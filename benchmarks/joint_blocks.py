"""The CPU time of the joint time-block SE (``rollout.joint_blocks.joint_ses``) per call.

Two arms of ``--requests`` requests each, interleaved in send time (Poisson arrivals, each request
to either arm at random), their loads at dispatch spread over seven load bands both arms hold,
TTFT and E2E lognormal with a load slope and waves of slow blocks both arms share. Matched as the
gray-release analysis does (``load_match.match_load``), then ``joint_ses`` is timed for TTFT and
ITL at p50, p95 and p99 (TTFT: a value per request; ITL: ``--tokens`` - 1 gaps per request, the
largest samples the function meets). Printed: the median CPU time (``time.process_time``) of
``--repeats`` calls after a first, and the SEs found (to compare before/after a change).

    PYTHONPATH=. .venv/bin/python benchmarks/joint_blocks.py [--requests 2000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tokenpace.core.analysis.rollout.joint_blocks import joint_ses
from tokenpace.core.analysis.rollout.load_match import MATCHED, match_load
from tokenpace.core.record import RequestRecord

MS = 1_000_000
LOADS = (1, 2, 3, 4, 5, 7, 9)  # in flight at dispatch: seven load bands


def arms(n: int, tokens: int, seed: int = 0) -> dict[str, list[RequestRecord]]:
    rng = np.random.default_rng(seed)
    sent = np.cumsum(rng.exponential(10 * MS, size=2 * n)).astype(np.int64)
    which = rng.permutation(np.arange(2 * n) % 2)
    wave = 1 + 2 * (rng.random(2 * n // 20 + 1) < 0.2)  # slow blocks of 20 requests, both arms
    out: dict[str, list[RequestRecord]] = {"a": [], "b": []}
    for i in range(2 * n):
        arm = "ab"[which[i]]
        load = int(rng.choice(LOADS))
        slow = wave[i // 20] * (1 + 0.05 * load)
        ttft = 40 * slow * rng.lognormal(0, 0.3)
        gaps = 12 * slow * rng.lognormal(0, 0.2, size=tokens - 1)
        r = RequestRecord(f"{arm}{i}", labels={"arm": arm, "upstream": arm}, sent_ns=int(sent[i]))
        r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft * MS)
        r.token_ns = [r.first_token_ns, *(r.first_token_ns + np.cumsum(gaps * MS).astype(np.int64)).tolist()]
        r.output_tokens_counted, r.end_ns = tokens, r.token_ns[-1]
        r.upstream_inflight = load
        out[arm].append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="per arm")
    ap.add_argument("--tokens", type=int, default=20, help="output tokens per request")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    records = arms(args.requests, args.tokens)
    match = match_load("a", records["a"], "b", records["b"])
    assert match.state == MATCHED, match.state
    common = list(match.common)
    print(f"{args.requests} requests an arm, {len(common)} common load bands")
    for metric in ("ttft", "itl"):
        found = joint_ses(*match.by_band, common, metric, [50.0, 95.0, 99.0])
        cpu = []
        for _ in range(args.repeats):
            t0 = time.process_time()
            joint_ses(*match.by_band, common, metric, [50.0, 95.0, 99.0])
            cpu.append(time.process_time() - t0)
        ses = ", ".join(f"p{q:g} {j.se_log:.5f}" for q, j in found.items())
        blocks = next(iter(found.values())).blocks if found else 0
        print(
            f"{metric:5} median {statistics.median(cpu) * 1000:7.1f} ms CPU  ({blocks} blocks; se_log {ses})"
        )


if __name__ == "__main__":
    main()
