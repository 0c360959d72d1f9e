"""Simulated requests per CPU second of `tokenpace sim --virtual` (the engine loop plus the summary).

Runs an open-loop Poisson load at ``--rate`` req/s for ``--requests`` requests on the default profile
(512 input, 128 output tokens unless told), times the run and the per-step summary separately with
``time.process_time()`` (CPU seconds: the machine is shared, wall time would measure the neighbours),
and prints simulated requests per CPU second. A day at 100 req/s is 8.64 M requests; the target is
>= 50,000 req per CPU second (under 3 minutes for that day). ``--summary-only`` keeps no records
(`run_virtual_streamed`: bounded streaming summaries per step); the peak RSS printed is the whole
process's (``ru_maxrss``), so run one configuration per process to compare memory.

    .venv/bin/python benchmarks/sim_virtual_speed.py [--requests 20000] [--rate 100] [--profile NAME]
        [--input-len 512] [--output-len 128] [--summary-only] [--cprofile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time

from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import VirtualLoad, get_profile, run_virtual, summarize_virtual
from tokenpace.sim.virtual_time.virtual import run_virtual_streamed
from tokenpace.sim.virtual_time.virtual_stream import StreamedSummary
from tokenpace.sim.virtual_time.virtual_summary import VirtualSummary


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20_000, help="about this many requests (rate x duration)")
    p.add_argument("--rate", type=float, default=100.0, help="Poisson req/s")
    p.add_argument("--profile", default=None, help="sim profile (default: the default profile)")
    p.add_argument("--input-len", default="512")
    p.add_argument("--output-len", default="128")
    p.add_argument("--summary-only", action="store_true", help="keep no records: streaming summaries")
    p.add_argument("--cprofile", action="store_true", help="print the 25 costliest functions")
    return p.parse_args()


def main() -> None:
    a = _args()
    load = VirtualLoad(
        input_len=parse_length(a.input_len),
        output_len=parse_length(a.output_len),
        rates=(a.rate,),
        step_duration_s=a.requests / a.rate,
        seed=0,
    )
    profile = get_profile(a.profile)
    prof = cProfile.Profile() if a.cprofile else None
    if prof:
        prof.enable()
    t0 = time.process_time()
    summary: VirtualSummary | StreamedSummary
    if a.summary_only:
        (step,) = run_virtual_streamed(load, profile)
        t1 = time.process_time()
        summary = step.summary()
        n = summary.client.counts["ok"]
    else:
        results = run_virtual(load, profile)
        t1 = time.process_time()
        summary = summarize_virtual(results, with_ci=False)
        n = len(results)
    t2 = time.process_time()
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"profile {profile.name}, {a.rate:g} req/s Poisson, input {a.input_len}, output {a.output_len}: "
        f"{n} requests, {load.step_duration_s:.0f} virtual s{', summary only' if a.summary_only else ''}"
    )
    print(f"  run      {t1 - t0:8.2f} CPU s  {n / (t1 - t0):10.0f} req/CPU s")
    print(f"  summary  {t2 - t1:8.2f} CPU s")
    print(f"  total    {t2 - t0:8.2f} CPU s  {n / (t2 - t0):10.0f} req/CPU s   (max RSS {rss_mib:.0f} MiB)")
    print(f"  TTFT p50 {summary.client.ttft_ms.p50:.2f} ms, TPOT p50 {summary.client.tpot_ms.p50:.3f} ms")
    day = 86_400 * 100 / (n / (t2 - t0))
    print(f"  a day at 100 req/s (8.64 M requests) would take ~{day / 60:.1f} CPU minutes")


if __name__ == "__main__":
    main()
