"""`--out -` (and /dev/stdout): the result JSON on standard output, the dashboard on standard error."""

from __future__ import annotations

import json

import pytest

from tokenpace.testing.procs import run_cli


@pytest.mark.parametrize("out", ["-", "/dev/stdout"])
def test_bench_out_dash_writes_the_json_to_stdout_and_no_file_named_dash(out, tmp_path):
    r = run_cli("bench", "-n", "3", "--input-len", "8", "--output-len", "4", "--no-store", "--out", out,
                cwd=str(tmp_path))  # fmt: skip
    assert r.returncode in (0, 3), r.stderr  # 3: a shared machine could not keep up (timing only)
    result = json.loads(r.stdout)  # nothing but the JSON on stdout
    assert result["summary"]["counts"]["ok"] == 3
    assert "TTFT" in r.stderr and "results:" in r.stderr  # the dashboard went to stderr
    assert not (tmp_path / "-").exists()
    records = tmp_path / "results" / result["records"]["path"]
    assert len(records.read_text().splitlines()) == 3


def test_sweep_out_dash_writes_the_sweep_json_to_stdout(tmp_path):
    r = run_cli("sweep", "--concurrency", "1,2", "-n", "3", "--input-len", "8", "--output-len", "4",
                "--no-store", "--out", "-", cwd=str(tmp_path), timeout=240)  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["steps"]) == 2 and not (tmp_path / "-").exists()
