"""`--percentiles 50,90,99,99.9`: asked on bench, sweep and report, each percentile shown with its
95 % interval wherever a person reads it (console compactly, HTML and Markdown in full)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenpace.core.asked_percentiles import asked_percentiles, parse_percentiles
from tokenpace.core.record import RequestRecord
from tokenpace.testing.procs import run_cli

ASKED = "50,90,99,99.9"


def _records(n: int) -> list[RequestRecord]:
    rng = np.random.default_rng(3)
    out = []
    for i, ttft in enumerate(rng.lognormal(3, 0.5, n)):
        sent = 1_000_000_000 * (i + 1)
        first = sent + int(ttft * 1e6)
        out.append(RequestRecord(f"r{i}", sent_ns=sent, first_token_ns=first, token_ns=[first, first + 10**7],
                                 end_ns=first + 10**7, output_tokens_server=2))  # fmt: skip
    return out


def test_each_asked_percentile_has_an_interval_around_it_and_says_when_it_is_thin():
    block = asked_percentiles(_records(400), parse_percentiles(ASKED))
    points = block["metrics"]["ttft_ms"]
    assert [p["name"] for p in points] == ["p50", "p90", "p99", "p99.9"]
    for p in points:
        assert p["ci95"][0] <= p["value"] <= p["ci95"][1]
    assert [p["low_sample"] for p in points] == [False, False, True, True]  # 4 and 0.4 beyond them


@pytest.mark.parametrize("bad", ["0,50", "50,100", "fast", "", ",".join(["50"] * 13)])
def test_bad_percentiles_are_refused_by_name(bad):
    r = run_cli("bench", "--percentiles", bad)
    assert r.returncode == 2 and "--percentiles" in r.stderr and "Traceback" not in r.stderr


def test_bench_shows_the_asked_percentiles_with_intervals_and_the_report_in_full(tmp_path):
    r = run_cli("bench", "-n", "30", "--input-len", "16", "--output-len", "8", "--percentiles", ASKED,
                "--no-store", "--out", "run.json", cwd=str(tmp_path), env={"COLUMNS": "100"})  # fmt: skip
    assert r.returncode in (0, 3), r.stderr  # 3: the shared machine could not keep up (timing only)
    assert "p99.9" in r.stdout and "ci95" in r.stdout
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["summary"]["percentiles"]["asked"] == [50.0, 90.0, 99.0, 99.9]
    md = run_cli("report", "run.json", cwd=str(tmp_path)).stdout
    header = next(line for line in md.splitlines() if line.startswith("| metric (ms)"))
    assert header == "| metric (ms) | mean | p50 | p90 | p99 | p99.9 | max | n |"
    ttft = next(line for line in md.splitlines() if line.startswith("| TTFT |"))
    assert ttft.count("[") == 4 and "95 % confidence interval" in md
    again = run_cli("report", "run.json", "--percentiles", "75", "--html", "r.html", cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr
    page = (tmp_path / "r.html").read_text()
    assert "<th>p75</th>" in page and "95% CI P75 [" in page


def test_a_sweep_asks_each_step_for_the_percentiles(tmp_path):
    r = run_cli("sweep", "--concurrency", "1,2", "-n", "6", "--input-len", "8", "--output-len", "4",
                "--percentiles", "50,99.9", "--no-store", "--out", "s.json", "-q", cwd=str(tmp_path),
                timeout=240)  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    steps = json.loads((tmp_path / "s.json").read_text())["steps"]
    assert all(s["summary"]["percentiles"]["asked"] == [50.0, 99.9] for s in steps)
