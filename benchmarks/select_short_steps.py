"""A short open-loop step near capacity as `select`'s measured evidence (issue 48): how often it
PASSes a line that the steady state fails, and what the steady-state rule costs a step under capacity.

An engine of 6 slots (llama-3.1-8b-h100, 256 in / 32 out) in virtual time: at each rate near its
capacity a 600 s run gives the steady TTFT P95 (from the schedule); the line sits at 0.8 x it, so
the steady state fails it. Thirty steps (seeds 0-29) are each judged by `select`'s rules as a single
run at the scenario's rate. The columns add the rules one at a time (each cell's reason tells which
stopped it): "intervals": the whole run's upper bound under the line; "+ Little": a run whose queue
grew through it (Little's law: overloaded) is undecided; "+ n_eff": the percentile (whole run) rests
on enough effective requests; "+ steady state": also the late half's (in send order) and its upper
bound is under the line, and the growth from the early half is not decided upward (``settled``).
The control rows run well under capacity (10 req/s, steady P95 about 31 ms) against a line the
steady state meets by far (200 ms): every PASS lost there is the rule's cost.

Run: PYTHONPATH=. python benchmarks/select_short_steps.py   (virtual time: about two CPU minutes)
"""

from __future__ import annotations

from typing import Any

from tokenpace.core.analysis.capacity.drift import trend_dict
from tokenpace.core.analysis.selection.scenarios import Scenario, SloLine
from tokenpace.core.analysis.selection.select import judge, run_point
from tokenpace.core.analysis.selection.settled import halves
from tokenpace.core.metrics import summarize
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.profile import get_profile
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

ENGINE = get_profile("llama-3.1-8b-h100").with_overrides(engine={"max_num_seqs": 6})
# (rate req/s, step s, line: a share of the steady P95 when < 10, else ms)
ROWS = ((19.0, 20, 0.8), (20.0, 20, 0.8), (21.0, 20, 0.8), (10.0, 20, 200.0), (10.0, 60, 200.0),
        (10.0, 120, 200.0))  # fmt: skip
TRIALS = 30
# what stopped a line met on its interval, by rule (a later rule's words first: the late half's
# own effective-sample reason names "effective requests" too)
STOPS = ((3, ("late half", "rising")), (2, ("effective requests",)), (1, ("the queue grew",)))


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
        "halves": halves(records, True),
    }


def stopped_by(reason: str) -> int:
    """Which rule (1-3) made a line met on its interval undecided; 4 when none did."""
    return next((rule for rule, words in STOPS if any(w in reason for w in words)), len(STOPS) + 1)


def main() -> None:
    print("| rate | step s | steady TTFT P95 ms (600 s) | line ms | PASS intervals | + Little | "
          "+ n_eff | + steady state |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for rate, duration, line_at in ROWS:
        steady = step(rate, 600, 99)["summary"]["ttft_from_scheduled_ms"]["p95"]
        line = steady * line_at if line_at < 10 else line_at
        scenario = Scenario("s", "", 256, 32, rate, None, (SloLine("ttft", "p95", line),), None)
        passed = [0] * (len(STOPS) + 1)
        for seed in range(TRIALS):
            verdict = judge(scenario, "x", [run_point("x", step(rate, duration, seed))], sweep=False)
            cell = verdict.cells[0]
            met = cell.status == "pass" or (cell.upper is not None and cell.upper < line)
            if met:  # counted as a PASS by every rule before the one that stopped it
                for k in range(stopped_by(cell.reason)):
                    passed[k] += 1
        cols = " | ".join(f"{p}/{TRIALS}" for p in passed)
        print(f"| {rate:g} | {duration} | {steady:.0f} | {line:.0f} | {cols} |")


if __name__ == "__main__":
    main()
