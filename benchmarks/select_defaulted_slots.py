"""`select` on profiles whose slot limit was defaulted (issue 48): never PASS PREDICTED where the
engine itself fails the line.

An engine of S slots (the shipped llama-3.1-8b-h100 with max_num_seqs S) is calibrated on closed
loops of 1, 2 and 4 users, as the docs' old recipe did: it sees 4 decoding at once and no slot limit.
The calibrated profile predicts an open-loop ladder; at each rate a scenario's TTFT P95 line sits 5 %
above the prediction's own 95 % upper bound (the prediction would pass it if it were judged). The
truth is the engine itself run at that rate (same seed). Counted: the cases where the engine fails
the line (its P95 over it) and select still says PASS, by the rule before this change (the
prediction's mean count in flight against what the calibration saw) and by the offered-load rule.

Run: PYTHONPATH=. python benchmarks/select_defaulted_slots.py   (virtual time: about a CPU minute)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from tokenpace.app.selection.select import SelectConfig, run_select
from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.metrics import ttft_ns
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_provenance
from tokenpace.sim.profiles.limits import limits_of
from tokenpace.sim.profiles.profile import Profile, get_network, get_profile
from tokenpace.sim.virtual_time.predicted_sweep import predicted_sweep_doc
from tokenpace.sim.virtual_time.virtual import run_virtual
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad

SLOTS = (5, 6, 8)
RATES = (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0)
SEEDS = (0, 1)


def engine(slots: int) -> Profile:
    return get_profile("llama-3.1-8b-h100").with_overrides(engine={"max_num_seqs": slots})


def calibrated(slots: int) -> Profile:
    loads = []
    for n in (16, 128, 512, 1024):
        load = VirtualLoad(parse_length(str(n)), parse_length("32"), concurrency=1, requests=8)
        loads.append(MeasuredLoad(f"in={n}", tuple(r.record for r in run_virtual(load, engine(slots)))))
    for c in (1, 2, 4):
        load = VirtualLoad(parse_length("256"), parse_length("32"), concurrency=c, requests=40)
        loads.append(
            MeasuredLoad(f"c={c}", tuple(r.record for r in run_virtual(load, engine(slots))), concurrency=c)
        )
    fit = fit_engine(loads)
    return calibrated_profile(fit, f"slots{slots}", "m", fit_provenance(fit))


def p95(results: list, step: int) -> float:
    return float(np.percentile([ttft_ns(r.record) for r in results if r.step == step], 95)) / 1e6


def main() -> None:
    rows = []
    folder = Path(tempfile.mkdtemp())
    for slots in SLOTS:
        profile = calibrated(slots)
        limits = limits_of(profile)
        assert not limits.slot_limit_identified
        for seed in SEEDS:
            load = VirtualLoad(
                parse_length("256"), parse_length("32"), rates=RATES, step_duration_s=60, seed=seed
            )
            pred = run_virtual(load, profile)
            truth = run_virtual(load, engine(slots))
            steps = [[r for r in pred if r.step == k] for k in range(len(RATES))]
            doc = predicted_sweep_doc(load, profile, get_network("local"), steps)
            path = folder / f"pred-{slots}-{seed}.json"
            path.write_text(json.dumps(doc))
            for k, rate in enumerate(RATES):
                step = doc["steps"][k]
                upper = step["summary"]["ttft_ms"]["ci95"]["p95"][1]
                line = round(upper * 1.05, 3)
                scen = folder / f"s-{slots}-{seed}-{k}.toml"
                scen.write_text(
                    f"[scenario.x]\ninput_len = 256\noutput_len = 32\nrate = {rate}\n"
                    f'slo = [{{ metric = "ttft", percentile = "p95", threshold_ms = {line} }}]\n'
                )
                new = run_select(None, SelectConfig("x", [str(path)], scenarios_file=scen)).verdicts[0].status
                mean_in_flight = rate * step["summary"]["e2e_ms"]["mean"] / 1e3
                old = "pass" if limits.beyond(mean_in_flight, 256) == "" else "left out"
                rows.append((slots, seed, rate, line, p95(truth, k), old, new))
    fails = [r for r in rows if r[4] > r[3]]
    print("| slots | seed | rate | line ms | engine P95 ms | before | after |")
    print("|---|---|---|---|---|---|---|")
    for slots, seed, rate, line, truth, old, new in rows:
        print(f"| {slots} | {seed} | {rate:g} | {line:.1f} | {truth:.1f} | {old} | {new} |")
    old_wrong = sum(1 for r in fails if r[5] == "pass")
    new_wrong = sum(1 for r in fails if r[6] == "pass")
    passes = sum(1 for r in rows if r[6] == "pass")
    print(
        f"\ncases {len(rows)}, engine fails the line in {len(fails)}; PASS PREDICTED there: before "
        f"{old_wrong}, after {new_wrong}; PASS PREDICTED in all after: {passes}"
    )
    worst = max((r[4] / r[3] for r in fails if r[5] == "pass"), default=0.0)
    print(f"worst engine P95 / line among the passes before: {worst:.2f}x")


if __name__ == "__main__":
    main()
