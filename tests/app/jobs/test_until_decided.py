"""`bench --repeat auto`: the candidate runs again only while the gate against the baseline is
undecided, against a scripted server whose slowdown is known."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from baseline_fixtures import served, tokenpace

from tokenpace.adapters.store import connect
from tokenpace.testing.scripted_server import Script

BASE = Script(ttft_s=0.05, itl_s=0.005, tokens=8)
ARGS = ("--model", "m", "-n", "60", "-c", "4", "--input-len", "16", "--output-len", "8", "--quiet")


def test_repeat_auto_stops_at_the_first_decision_and_refuses_without_a_gate(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(BASE) as srv:
        base = tokenpace(
            "bench",
            "--url",
            srv.url,
            *ARGS,
            "--repeat",
            "3",
            "--store",
            db,
            "--out",
            str(tmp_path / "r.json"),
        )
        assert base.returncode in (0, 3), base.stderr
        store = connect(db)
        store.set_baseline("prod", store.list_runs()[-1].id)
        # a true +200 % TTFT: beyond the 5 % gate by more than a busy host's noise between the three
        # baseline runs can widen the interval
        srv.default = dataclasses.replace(BASE, ttft_s=0.05 * 3)
        slow = tokenpace("bench", "--url", srv.url, *ARGS, "--repeat", "auto", "--baseline", "prod",
                         "--max-regression", "ttft.p50=5%", "--max-runs", "4", "--store", db)  # fmt: skip
        bare = tokenpace("bench", "--url", srv.url, "--repeat", "auto", "--no-store")
        typo = tokenpace("bench", "--url", srv.url, "--repeat", "sometimes", "--no-store")
    text = " ".join(slow.stdout.split())
    assert slow.returncode == 1, (slow.stdout[-2000:], slow.stderr)
    # one run, or more where a busy host spoiled a baseline run (fewer degrees of freedom: a looser bound)
    assert re.search(r"REGRESSED after [1-4] run\(s\) against baseline prod", text) and "always valid" in text
    assert bare.returncode == 2 and "give --baseline NAME and --max-regression" in bare.stderr
    assert typo.returncode == 2 and "give a count (2-20) or auto" in typo.stderr
