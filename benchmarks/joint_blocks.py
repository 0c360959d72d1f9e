"""The CPU time of the joint time-block SE (``rollout.joint_blocks.joint_ses``) per call: its
resamples drawn in chunks of rows, against the draw-by-draw loop it replaced (kept here as the
reference: a draw at a time, the same draws, the same SEs).

Two arms of ``--requests`` requests each, interleaved in send time (Poisson arrivals, each request
to either arm at random), their loads at dispatch spread over seven load bands both arms hold,
latencies lognormal with a load slope and waves of slow blocks both arms share. Matched as the
gray-release analysis does (``load_match.match_load``), then ``joint_ses`` is timed for TTFT and
ITL at p50, p95 and p99 (TTFT: a value per request; ITL: ``--tokens`` - 1 gaps per request, the
largest samples it meets). Printed per metric: the median and least CPU time
(``time.process_time``) of ``--repeats`` calls of each, interleaved, after a first; the SEs found.

    PYTHONPATH=. .venv/bin/python benchmarks/joint_blocks.py [--requests 2000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from tokenpace.core.analysis.rollout import joint_blocks
from tokenpace.core.analysis.rollout.joint_blocks import _Arm, joint_ses
from tokenpace.core.analysis.rollout.load_match import MATCHED, match_load
from tokenpace.core.record import RequestRecord

MS = 1_000_000
LOADS = (1, 2, 3, 4, 5, 7, 9)  # in flight at dispatch: seven load bands
QS = [50.0, 95.0, 99.0]


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
        gaps = np.cumsum(12 * slow * rng.lognormal(0, 0.2, size=tokens - 1) * MS).astype(np.int64)
        r = RequestRecord(f"{arm}{i}", labels={"arm": arm, "upstream": arm}, sent_ns=int(sent[i]))
        r.first_token_ns = r.first_answer_ns = r.sent_ns + int(ttft * MS)
        r.token_ns = [r.first_token_ns, *(r.first_token_ns + gaps).tolist()]
        r.output_tokens_counted, r.end_ns = tokens, r.token_ns[-1]
        r.upstream_inflight = load
        out[arm].append(r)
    return out


def _one_row(values: np.ndarray, weights: np.ndarray, qs: np.ndarray) -> np.ndarray:
    keep = weights > 0
    v, w = values[keep], weights[keep]
    cum = np.cumsum(w)
    out: np.ndarray = np.interp(qs, (cum - w / 2) / cum[-1], v)
    return out


def loop_draws(
    ref: _Arm, cand: _Arm, cells: np.ndarray, reps: np.ndarray, qs: np.ndarray, _: np.ndarray
) -> np.ndarray:
    """The draw-by-draw loop's resamples (a draw at a time: the implementation this replaced)."""
    nb, found = cells.shape[1] // 2, []
    for row in reps:
        m_ref, m_cand = row[ref.blocks].astype(np.float64), row[cand.blocks].astype(np.float64)
        tot_ref = np.bincount(ref.bands, weights=m_ref, minlength=nb)
        tot_cand = np.bincount(cand.bands, weights=m_cand, minlength=nb)
        both = (tot_ref > 0) & (tot_cand > 0)
        if not both.any():
            continue
        shares = np.where(both, tot_ref, 0.0) / float(np.sum(tot_ref[both]))
        w_ref = m_ref * (shares / np.where(both, tot_ref, 1.0))[ref.bands]
        w_cand = m_cand * (shares / np.where(both, tot_cand, 1.0))[cand.bands]
        a, b = _one_row(ref.values, w_ref, qs), _one_row(cand.values, w_cand, qs)
        if np.all(a > 0) and np.all(b > 0):
            found.append(np.log(b / a))
    return np.array(found).reshape(-1, len(qs))


def _timed(call: Callable[[], object]) -> float:
    t0 = time.process_time()
    call()
    return time.process_time() - t0


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
    chunked, draws = joint_blocks.CHUNK_ELEMENTS, joint_blocks._draws
    print(f"{args.requests} requests an arm, {len(common)} load bands; CHUNK_ELEMENTS {chunked}")

    def loop() -> dict[float, joint_blocks.JointSE]:
        joint_blocks.CHUNK_ELEMENTS, joint_blocks._draws = 1, loop_draws  # a draw a chunk
        try:
            return joint_ses(*match.samples(metric), common, QS)
        finally:
            joint_blocks.CHUNK_ELEMENTS, joint_blocks._draws = chunked, draws

    for metric in ("ttft", "itl"):
        found, before = joint_ses(*match.samples(metric), common, QS), loop()
        cpu: dict[str, list[float]] = {"chunks": [], "loop": []}
        for _ in range(args.repeats):
            cpu["chunks"].append(_timed(lambda: joint_ses(*match.samples(metric), common, QS)))  # noqa: B023
            cpu["loop"].append(_timed(loop))
        print(f"{metric}: {next(iter(found.values())).blocks} time blocks both arms share")
        for name, times in cpu.items():
            ms = statistics.median(times) * 1000, min(times) * 1000
            print(f"  {name:6} median {ms[0]:7.1f} ms CPU, least {ms[1]:7.1f}")
        for q, se in found.items():
            print(f"  p{q:g} se_log {se.se_log:.6f} (loop {before[q].se_log:.6f})")


if __name__ == "__main__":
    main()
