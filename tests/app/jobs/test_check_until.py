"""`check --until-decided`: the stored candidate is judged first (always-valid intervals); its test is
run again, rebuilt from its stored conditions, only while the gate is undecided, up to --max-runs;
a test that cannot be rebuilt is refused with the reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from baseline_fixtures import ROOT, served, tokenpace
from docs.doc_commands import doc_commands

from tokenpace.adapters.store import connect
from tokenpace.app.jobs.check_until import CannotRerun, baseline_rerun, rerun_config
from tokenpace.testing.procs import run_cli_measured
from tokenpace.testing.scripted_server import Script

BASE = Script(ttft_s=0.05, itl_s=0.005, tokens=8)
ARGS = ("--model", "m", "-n", "60", "-c", "4", "--input-len", "16", "--output-len", "8", "--quiet")
GATE = ("--baseline", "prod", "--max-regression", "ttft.p50=5%")
DOCUMENTED = [c for c in doc_commands() if c.run_elsewhere() == "tests/app/jobs/test_check_until.py"]


def _bench(url: str, db: str, *more: str) -> None:
    """A setup's run: check refuses a NOT VALID candidate, so a busy host's is measured again."""
    done = run_cli_measured("bench", "--url", url, *ARGS, "--store", db, *more, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr


def test_check_until_decided_runs_the_candidate_again_only_while_undecided(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(BASE) as srv:
        _bench(srv.url, db, "--repeat", "3", "--out", str(tmp_path / "base.json"))
        store = connect(db)
        store.set_baseline("prod", store.list_runs()[-1].id)
        _bench(srv.url, db, "--label", "version=same")  # the same server: one run cannot prove a pass
        runs_before = len(store.list_runs())
        budget_one = tokenpace("check", *GATE, "--run", "version=same", "--until-decided", "--max-runs", "1",
                               "--store", db)  # fmt: skip
        runs_after_one = len(store.list_runs())
        (documented,) = DOCUMENTED  # the newest run measured like the baseline: version=same
        again = tokenpace(*documented.argv, env={"TOKENPACE_STORE": db})
        runs_added = len(store.list_runs()) - runs_after_one
        # a true +200 % TTFT: beyond the 5 % gate by more than a busy host's noise between the three
        # baseline runs can widen the interval of one candidate run
        srv.default = dataclasses.replace(BASE, ttft_s=0.05 * 3)
        _bench(srv.url, db, "--label", "version=slow")
        before_slow = len(store.list_runs())
        slow = tokenpace("check", *GATE, "--run", "version=slow", "--until-decided", "--store", db)
        slow_added = len(store.list_runs()) - before_slow
    one = " ".join(budget_one.stdout.split())
    # the budget holds only the stored run: nothing run, UNDECIDED, and what would decide it
    assert runs_after_one == runs_before
    assert budget_one.returncode == 5, (one[-2000:], budget_one.stderr)
    assert "UNDECIDED after 1 stored candidate run(s)" in one and "and 0 added" in one
    assert "to decide: ttft.p50: its always-valid interval" in one
    assert "candidate run" in one and ("more baseline run(s)" in one or "no number of baseline runs" in one)
    # a budget of 4: runs added (at most 3) while candidate runs can decide, never a regression of the
    # same server
    text = " ".join(again.stdout.split())
    assert again.returncode in (0, 5), (text[-2000:], again.stderr)
    assert runs_added <= 3 and f"and {runs_added} added" in text, text[-3000:]
    if runs_added == 0:  # the 3-run baseline's own noise bound is what is too wide: said, not rerun
        assert again.returncode == 5 and "the baseline side limits the decision" in text, text[-3000:]
    assert ("PASS after" in text) == (again.returncode == 0)
    # a true +200 %: the stored run decides alone, nothing is run
    stext = " ".join(slow.stdout.split())
    assert slow.returncode == 1, (stext[-2000:], slow.stderr)
    assert "REGRESSED after 1 stored candidate run(s)" in stext and slow_added == 0


def test_with_one_baseline_run_a_regression_is_decided_or_the_baseline_side_is_named(tmp_path: Path) -> None:
    """One stored baseline run: its own term of the interval keeps a +20 % change across a 5 % gate
    however many candidate runs the budget allows, so none is run, and the advice is to grow the
    baseline (or, where a busy host made the candidate's runs noisy too, to grow both sides)."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(BASE) as srv:
        _bench(srv.url, db)
        store = connect(db)
        store.set_baseline("prod", store.list_runs()[-1].id)
        srv.default = dataclasses.replace(BASE, ttft_s=0.05 * 1.2)  # a true +20 % TTFT
        _bench(srv.url, db, "--label", "version=slow")
        before = len(store.list_runs())
        done = tokenpace("check", *GATE, "--run", "version=slow", "--until-decided", "--max-runs", "6",
                         "--store", db)  # fmt: skip
        added = len(store.list_runs()) - before
    text = " ".join(done.stdout.split())
    assert done.returncode in (1, 5), (text[-2000:], done.stderr)
    if done.returncode == 5:
        assert "the baseline side limits the decision" in text, text[-2000:]
        assert "--repeat" in text and "tokenpace baseline set prod RUN" in text
        assert (
            "--until-decided --max-runs 6 --run " in text and "--baseline-url URL" in text
        )  # the exact command
        if "both must grow" in text:  # candidate runs were tried (a noisy one could have decided)
            assert "no number of candidate runs" in text and "the baseline needs" in text, text[-3000:]
            return
        assert "so no more were run" not in text or added == 0
        assert "more baseline run(s) with the candidate as it is" in text  # both sides' needs said
        assert "the baseline needs" in text and "more run(s)" in text  # how many, never more candidate runs


def test_with_the_baseline_served_its_side_is_measured_again_where_it_limits(tmp_path: Path) -> None:
    """One stored baseline run, its build still served at another URL: where the baseline side
    limits, its stored test runs there (labelled, never a candidate later), and a +20 % regression
    is decided, or the baseline side's budget is spent and said; the candidate is not run while
    its runs cannot help."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(BASE) as old, served(dataclasses.replace(BASE, ttft_s=0.05 * 1.2)) as new:
        _bench(old.url, db)
        store = connect(db)
        store.set_baseline("prod", store.list_runs()[-1].id)
        _bench(new.url, db, "--label", "version=slow")
        before = {r.id for r in store.list_runs()}
        done = tokenpace("check", *GATE, "--run", "version=slow", "--until-decided", "--max-runs", "6",
                         "--baseline-url", old.url, "--store", db)  # fmt: skip
        added = [r for r in store.list_runs() if r.id not in before]
        stored_only = tokenpace("check", *GATE, "--run", "version=slow", "--until-decided",
                                "--rerun-baseline", "--store", db)  # fmt: skip
        plain = tokenpace("check", *GATE, "--baseline-url", old.url, "--store", db)
        later = tokenpace("check", *GATE, "--store", db)  # the newest candidate: never a baseline rerun
    text = " ".join(done.stdout.split())
    assert done.returncode in (1, 5), (text[-2000:], done.stderr)
    reruns = [r for r in added if r.labels.get("baseline_rerun") == "prod"]
    assert reruns and all(r.endpoint and old.url.split("//")[1] in r.endpoint for r in reruns)
    assert f"measured again at {old.url}" in text
    if done.returncode == 5:
        assert "the baseline needs" in text and "raise --max-runs" in text, text[-2000:]
        assert len(reruns) == 5  # the baseline side at its budget
    else:
        assert "REGRESSED after" in text
    assert stored_only.returncode == 2 and "give --baseline-url URL" in stored_only.stderr
    assert plain.returncode == 2 and "only with --until-decided" in plain.stderr
    assert "baseline_rerun" not in " ".join(later.stdout.split()) and later.returncode in (0, 1, 5)


def test_check_until_decided_refuses_a_test_it_cannot_run_again(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(BASE) as srv:
        _bench(srv.url, db)
        store = connect(db)
        store.set_baseline("prod", store.list_runs()[-1].id)
        _bench(srv.url, db, "--header", "X-Team:search")
        done = tokenpace("check", *GATE, "--until-decided", "--max-runs", "3", "--store", db)
        bad = tokenpace("check", *GATE, "--until-decided", "--max-runs", "0", "--store", db)
    assert done.returncode == 2 and "sent headers, whose values are never stored" in done.stderr
    assert "--repeat auto" in done.stderr and "Traceback" not in done.stderr
    assert bad.returncode == 2 and "--max-runs must be between 1 and 20" in bad.stderr


CONDITIONS = {
    "model": "m",
    "endpoint": "http://127.0.0.1:9/v1",
    "target": "external",
    "api": "openai-chat",
    "stream": True,
    "load": {"mode": "closed_loop", "concurrency": 4, "rate": None, "requests": 60, "duration_s": None,
             "warmup": 2, "timeout_s": 30.0, "ramp": None},
    "workload": {"kind": "synthetic", "input_len": {"spec": "lognormal:512,128"},
                 "output_len": {"spec": "64"}},
    "sampling": {"temperature": 0.5, "top_p": 0.9, "ignore_eos": True},
    "seed": 7,
    "prompt_salt": "none",
    "slo": {"ttft_ms": 500.0},
    "labels": {"version": "1.5", "repeat": "g1"},
    "headers": [],
}  # fmt: skip


def test_rerun_config_is_the_stored_test() -> None:
    config, profile = rerun_config(CONDITIONS)
    assert profile is None and config.url == "http://127.0.0.1:9/v1" and config.api == "chat"
    assert (config.concurrency, config.requests, config.warmup, config.timeout_s) == (4, 60, 2, 30.0)
    assert config.input_len.text == "lognormal:512,128" and config.output_len.text == "64"
    assert (config.seed, config.prompt_salt, config.sampling.temperature) == (7, "none", 0.5)
    assert config.slo.ttft_ms == 500.0 and config.labels == {"version": "1.5"}  # a new group of its own
    sim, profile = rerun_config(CONDITIONS | {"target": "sim:llama-3.1-8b-h100"})
    assert profile == "llama-3.1-8b-h100" and sim.url == ""


def test_the_baseline_is_measured_again_only_where_its_build_is_said_to_run() -> None:
    assert baseline_rerun(CONDITIONS, "prod", None, False) is None  # not asked: never rerun
    at = baseline_rerun(CONDITIONS, "prod", "http://127.0.0.1:7/v1", False)
    assert at is not None and at.config.url == "http://127.0.0.1:7/v1" and at.sim_profile is None
    assert at.config.labels == {"version": "1.5"} and at.where == "at http://127.0.0.1:7/v1"
    sim = baseline_rerun(CONDITIONS | {"target": "sim:llama-3.1-8b-h100"}, "prod", None, True)
    assert sim is not None and sim.sim_profile == "llama-3.1-8b-h100" and "simulator profile" in sim.where
    with pytest.raises(ValueError, match="may serve another build now; give --baseline-url URL"):
        baseline_rerun(CONDITIONS, "prod", None, True)  # its stored endpoint may serve the candidate now
    with pytest.raises(CannotRerun, match=r"cannot run the baseline's test again.*baseline set NAME RUN"):
        baseline_rerun(CONDITIONS | {"headers": ["x-team"]}, "prod", "http://127.0.0.1:7/v1", False)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"workload": {"kind": "dataset"}}, "its workload is 'dataset'"),
        ({"headers": ["x-team"]}, "sent headers"),
        ({"workload": {**CONDITIONS["workload"], "sessions": {"turns": 3}}}, "multi-turn sessions"),  # type: ignore[dict-item]
        ({"workload": {**CONDITIONS["workload"], "shared_prefix": {}}}, "shared prefixes"),  # type: ignore[dict-item]
        ({"load": {**CONDITIONS["load"], "ramp": {"over_s": 5}}}, "ramped its load up"),  # type: ignore[dict-item]
        ({"api": "no-such-api"}, "is not known"),
        ({"workload": {"kind": "synthetic", "input_len": {}}}, "stored conditions are incomplete"),
    ],
)
def test_rerun_config_refuses_what_the_store_cannot_say(change: dict, why: str) -> None:
    with pytest.raises(CannotRerun, match=why):
        rerun_config(CONDITIONS | change)
