"""A short open-loop step near capacity as `select`'s measured evidence (issue 48): how often it
PASSes a line that the steady state fails.

An engine of 6 slots (llama-3.1-8b-h100, 256 in / 32 out) in virtual time: at each rate near its
capacity a 600 s run gives the steady TTFT P95 (from the schedule); the line sits at 0.8 x it, so
the steady state fails it. Thirty 20 s steps (seeds 0-29) are each judged by `select`'s rules as a
single run at the scenario's rate. "Before": a pass on the intervals alone; "after": a line met on a
run whose queue grew through it (Little's law: overloaded) is undecided. The intervals themselves
(which treat neighbouring requests as independent) are another part of issue 48.

Run: PYTHONPATH=. python benchmarks/select_short_steps.py   (virtual time: about a CPU minute)
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.select import judge, run_point
from tokenpace.core.metrics import summarize
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.profile import get_profile
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

ENGINE = get_profile("llama-3.1-8b-h100").with_overrides(engine={"max_num_seqs": 6})
RATES = (19.0, 20.0, 21.0)
TRIALS = 30


def step(rate: float, duration_s: float, seed: int) -> dict[str, Any]:
    load = VirtualLoad(
        parse_length("256"), parse_length("32"), rates=(rate,), step_duration_s=duration_s, seed=seed
    )
    records = [r.record for r in run_virtual(load, ENGINE)]
    return {
        "conditions": {"load": {"mode": "open_loop", "rate": rate, "concurrency": None}},
        "summary": summarize(records, open_loop=True).to_dict(),
        "valid": True,
        "interrupted": False,
        "time_trend": trend_dict(records, True),
    }


def main() -> None:
    print("| rate | steady TTFT P95 ms (600 s) | line ms | PASS before | PASS after |")
    print("|---|---|---|---|---|")
    for rate in RATES:
        steady = step(rate, 600, 99)["summary"]["ttft_from_scheduled_ms"]["p95"]
        line = steady * 0.8
        scenario = Scenario("s", "", 256, 32, rate, None, (SloLine("ttft", "p95", line),), None)
        before = after = 0
        for seed in range(TRIALS):
            verdict = judge(scenario, "x", [run_point("x", step(rate, 20, seed))], sweep=False)
            cell = verdict.cells[0]
            before += cell.status == "pass" or "queue grew" in cell.reason
            after += verdict.status == "pass"
        print(f"| {rate:g} | {steady:.0f} | {line:.0f} | {before}/{TRIALS} | {after}/{TRIALS} |")


if __name__ == "__main__":
    main()
