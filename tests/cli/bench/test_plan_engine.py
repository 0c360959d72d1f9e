"""`tokenpace plan` on a real GPU engine's concurrency sweep (tests/data/engines/h200: Hugging Face
`transformers serve --continuous-batching` on one H200, 1 / 4 / 16 / 64 users and the revisit of 1).
That engine finishes requests in waves (at 64 users waves of 3.4, 3.5, 1.4, 1.3 and 3.4 s): a rate
counted over a window between waves put 82 requests in flight for 64 users. No figure may rest on
such a step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tokenpace.adapters.results import read_records
from tokenpace.core.steady import steady_state
from tokenpace.testing.procs import FINISHED, run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "engines" / "h200"


@pytest.fixture(scope="module")
def gpu_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    p = run_cli("plan", str(DATA / "conc.json"), "--peak-rps", "100", "--out", str(out), timeout=120)
    assert p.returncode in FINISHED, p.stderr
    return json.loads(out.read_text()), p.stdout


def test_every_step_the_plan_uses_keeps_at_most_its_users_in_flight(gpu_plan):
    doc, _ = gpu_plan
    users = {
        s["step"]: c for s, c in zip(doc["analysis"]["littles_law"]["steps"], (1, 4, 16, 64), strict=True)
    }
    little = {s["step"]: s for s in doc["analysis"]["littles_law"]["steps"]}
    used = doc["analysis"]["used_steps"]
    assert used  # the plan rests on something
    for step in used:
        assert little[step]["status"] == "ok"
        assert little[step]["in_flight"] <= 1.1 * users[step], little[step]
    best = doc["analysis"]["max_sustainable"]["step"]
    assert best in used and little[best]["status"] == "ok"


def test_the_steady_rate_at_64_users_respects_littles_law_where_the_count_did_not():
    records = read_records(DATA / "conc.step04.records.jsonl")
    stored = json.loads((DATA / "conc.json").read_text())["steps"][3]["summary"]
    old = stored["steady"]["request_throughput"] * stored["e2e_ms"]["mean"] / 1000
    assert old > 1.25 * 64  # the old count: 31.4 req/s x 2.6 s = 82 in flight for 64 users
    s = steady_state(records, 64)
    assert s.estimator == "in_flight/latency"
    assert s.in_flight is not None and 0.95 * 64 <= s.in_flight <= 64.01  # measured, never above C
    assert s.request_throughput * s.mean_latency_s == pytest.approx(s.in_flight, rel=0.01)
    # every request after each user's first, per user: 26.8 req/s; the count over the window: 31.4
    assert s.request_throughput == pytest.approx(26.8, abs=0.5)


def test_a_sweep_without_its_records_is_planned_on_what_it_stored_and_says_so(tmp_path):
    shutil.copy(DATA / "conc.json", tmp_path / "conc.json")  # no records beside it
    out = tmp_path / "plan.json"
    p = run_cli("plan", str(tmp_path / "conc.json"), "--out", str(out), timeout=120)
    assert p.returncode in FINISHED, p.stderr
    assert "not found" in p.stdout
    doc = json.loads(out.read_text())
    little = {s["step"]: s for s in doc["analysis"]["littles_law"]["steps"]}
    for step in doc["analysis"]["used_steps"]:
        assert little[step]["status"] == "ok"
