"""docs/selection.md's worked example runs as shown (three simulator profiles, two scenarios), and
`select` / `scenarios` turn bad input into one line and exit 2."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tokenpace.testing.procs import run_cli, run_cli_measured

DOC = Path(__file__).resolve().parents[3] / "docs" / "selection.md"


def _block(lang: str, index: int = 0) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)[index]


def _doc_commands() -> list[list[str]]:
    lines = [ln.strip() for ln in _block("sh").splitlines() if ln.strip().startswith("tokenpace ")]
    return [shlex.split(ln)[1:] for ln in lines]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> dict[str, object]:
    """Run every command of the worked example in a fresh folder; keep each one's output."""
    cwd = tmp_path_factory.mktemp("selection")
    (cwd / "team.toml").write_text(_block("toml"), encoding="utf-8")
    outputs, codes = {}, {}
    for args in _doc_commands():
        r = run_cli_measured(*args, cwd=str(cwd), timeout=180)  # a NOT VALID sweep: measured again
        # select: 1 when every candidate fails, 5 when none passes but some is undecided
        assert r.returncode == 0 or (args[0] == "select" and r.returncode in (1, 5)), (args, r.stderr)
        outputs[shlex.join(args)] = r.stdout
        codes[shlex.join(args)] = (r.returncode, r.stderr)
    return {"cwd": cwd, "outputs": outputs, "codes": codes}


def test_select_exits_0_only_when_a_candidate_passes_every_scenario_asked(example):
    """A pipeline picking a candidate must see when none passes: 1 all fail, 5 some undecided."""
    for line, (code, stderr) in example["codes"].items():
        if not line.startswith("select"):
            continue
        out = example["outputs"][line]
        if "--json" in line:
            docs = json.loads(out)
            docs = docs.get("scenarios", [docs])
            assert [d["exit_code"] for d in docs] and max(d["exit_code"] for d in docs) in (0, 1, 5)
            none = [d for d in docs if d["recommendation"]["candidate"] is None]
        else:
            none = ["x"] if "recommendation: none" in out else []
        assert (code == 0) == (not none), (line, code, stderr)
        if code:
            assert stderr.startswith("tokenpace select: ") and f"(exit {code})" in stderr, stderr
            assert ("UNDECIDED: no candidate passes" in stderr) == (code == 5), stderr


def _output(example, *words: str) -> str:
    hits = [out for cmd, out in example["outputs"].items() if all(w in cmd for w in words)]
    assert len(hits) == 1, words
    return hits[0]


def test_the_doc_measures_three_profiles_and_judges_its_scenarios():
    commands = _doc_commands()
    sims = {a[a.index("--sim") + 1] for a in commands if "--sim" in a}
    assert len(sims) == 3
    scenarios = {a[a.index("--scenario") + 1] for a in commands if a[0] == "select"}
    assert scenarios == {"reports", "assistant", "long-context"}


def test_reports_fails_the_large_model_and_recommends_a_passing_priced_one(example):
    out = _output(example, "--scenario reports", "candidate=70b")
    row = next(ln for ln in out.splitlines() if ln.lstrip("│| ").startswith("candidate=70b"))
    assert "FAIL" in row  # E2E P90 near 480 ms against a 400 ms line
    rec = re.search(r"recommendation: (candidate=\w+) \(cheapest passing: \$([\d.]+) per 1k", out)
    assert rec and rec.group(1) in ("candidate=8b", "candidate=30b")
    assert "at concurrency 4" in out  # the sweep's own concurrency-4 step, not an interpolation


def test_assistant_a_rate_scenario_is_not_judged_on_closed_loop_measurements(example):
    doc = json.loads(_output(example, "--scenario assistant", "8b.json"))
    by_name = {c["candidate"]: c for c in doc["candidates"]}
    sweep, run = by_name["8b.json"], by_name["candidate=70b"]  # a sweep by its file
    # 15 req/s of arrivals: a closed-loop sweep that reached that rate is not evidence for it
    assert sweep["kind"] == "sweep" and not sweep["placement"]["trusted"]
    assert sweep["status"] == "unknown" and sweep["margin"] is None
    assert "not enough evidence" in sweep["placement"]["where"]
    assert run["status"] == "unknown"
    assert all("not at the scenario's load" in c["reason"] for c in run["cells"])
    assert run["cost"] == {"none": "not costed: no numbers at the scenario's load"}


def test_a_predicted_sweep_is_judged_in_a_table_of_its_own_and_never_recommended(example):
    out = _output(example, "--scenario assistant", "8b-predicted.json")
    measured, _, predicted = out.partition("PREDICTED by the simulator (not measured)")
    assert "candidate=70b (run)" in measured and "8b-predicted.json" not in measured
    row = next(ln for ln in predicted.splitlines() if ln.lstrip("│| ").startswith("8b-predicted.json"))
    assert "PASS PREDICTED" in row  # judged at its 15 req/s open-loop step
    assert "recommendation: none (no candidate passes" in out
    assert "PREDICTED: 8b-predicted.json would be picked on predicted numbers" in out
    assert "a predicted pass is not a measured one" in out


def test_the_predicted_candidate_is_marked_in_the_json_and_the_html(example):
    cwd = example["cwd"]
    args = ("--scenarios", "team.toml", "--scenario", "assistant", "8b-predicted.json", "--store", "runs.db")
    r = run_cli("select", *args, "--json", "--html", "predicted.html", cwd=str(cwd))
    assert r.returncode == 5 and "(no measured candidate)" in r.stderr, r.stderr  # a prediction never passes
    doc = json.loads(r.stdout)
    (cand,) = doc["candidates"]
    assert cand["kind"] == "predicted" and cand["status"] == "pass"
    assert cand["predicted"].startswith("PREDICTED by the simulator from the shipped profile")
    assert "15 req/s" in cand["placement"]["where"]
    assert doc["recommendation"] == {"candidate": None, "reason": doc["recommendation"]["reason"],
                                     "margin": None, "basis": "measured"}  # fmt: skip
    assert doc["predicted_recommendation"]["basis"] == "PREDICTED"
    page = (cwd / "predicted.html").read_text(encoding="utf-8")
    assert "PREDICTED by the simulator (not measured)" in page and "PASS PREDICTED" in page


def test_flags_price_a_candidate_and_tiered_routing_blends(example):
    out = _output(example, "--route-small")
    assert "($2/h over" in out  # the flag's price, not the file's $2.5/h
    m = re.search(
        r"tiered routing: 60% to candidate=30b, the rest to candidate=8b: E2E P90 < 400 ms: ([\d.]+) ms", out
    )
    assert m, out


def test_scenarios_lists_the_defaults_and_the_users(example):
    out = _output(example, "scenarios --scenarios")
    for name in ("voice", "chat", "code-completion", "rag-answer", "long-form", "batch-summarisation"):
        assert name in out
    assert "assistant" in out and "team.toml" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["select", "--scenario", "nope", "latest"], "no scenario 'nope'"),
        (["select", "--scenario", "voice"], "at least one candidate"),
        (["select", "--scenario", "voice", "no-such-run"], "no run"),
        (["select", "--scenario", "voice", "latest", "--price", "x=cheap"], "not a price"),
        (["select", "--scenario", "voice", "latest", "--hourly", "1"], "NAME=PRICE"),
        (["select", "--scenario", "voice", "latest", "--route-small", "x"], "not one of the candidates"),
        (["scenarios", "--scenarios", "missing.toml"], "cannot read"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(example, args, message):
    r = (
        run_cli(*args, "--store", "runs.db", cwd=str(example["cwd"]))
        if args[0] == "select"
        else run_cli(*args, cwd=str(example["cwd"]))
    )
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_plain_scenarios_lists_the_shipped_defaults_as_json():
    r = run_cli("scenarios", "--json")
    assert r.returncode == 0, r.stderr
    names = {s["name"] for s in json.loads(r.stdout)["scenarios"]}
    assert names == {"voice", "chat", "code-completion", "rag-answer", "long-form", "batch-summarisation"}
    r = run_cli("scenarios")
    assert r.returncode == 0 and "voice" in r.stdout


def test_an_input_length_sweep_fits_prefill_and_select_moves_a_candidate_by_it(example):
    sweep = json.loads((example["cwd"] / "prefill.json").read_text())
    fit = sweep["prefill_fit"]
    assert sweep["mode"] == "input_len" and len(sweep["steps"]) == 4
    lo, hi = fit["ms_per_1k_tokens_ci95"]
    assert 0 < lo <= fit["ms_per_1k_tokens"] <= hi  # TTFT grows with the prompt
    out = _output(example, "--scenario long-context")
    assert "moved from ~" in out and "to 4096 input tokens by the prefill fit" in out
    assert "not at the scenario's input length" in out  # the MoE, measured at 512 without a fit
    printed = _output(example, "--input-len 512,1024,2048,4096")
    assert "Prefill:" in printed and "ms per 1k input tokens" in printed


def test_the_html_report_has_a_section_and_two_charts_per_scenario(example):
    page = (example["cwd"] / "select.html").read_text(encoding="utf-8")
    assert page.count("<h2>") == 2 and 'data-figures="4"' in page
    assert "long-context: candidates against the line" in page and "reports: cost vs latency" in page


def test_an_input_length_sweep_is_refused_as_a_candidate(example):
    sweep_id = json.loads((example["cwd"] / "prefill.json").read_text())["sweep_id"]
    r = run_cli("select", "--scenario", "voice", sweep_id, "--store", "runs.db", cwd=str(example["cwd"]))
    assert r.returncode == 2 and "steps the input length" in r.stderr and "--input-fit" in r.stderr
