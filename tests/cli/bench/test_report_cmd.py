"""`tokenpace report`: HTML that opens offline, Markdown and CSV of the same tables, clear errors."""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import re
import shutil

import pytest
from plotly.offline import get_plotlyjs

from tokenpace.testing.procs import FINISHED, run_cli


def tokenpace(*args, timeout=90):
    return run_cli(*args, timeout=timeout)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A two-step sweep and a run with interrupted streams, both against the scripted server (40
    requests a step: fewer than 20 completions in its steady window would leave a step out)."""
    from conftest import FAULTS, ThreadedServer

    from tokenpace.testing.scripted_server import ScriptedServer

    d = tmp_path_factory.mktemp("report")
    with ThreadedServer(ScriptedServer(FAULTS["ok"], scripts=FAULTS)) as srv:
        p = tokenpace(
            "sweep", "--url", srv.url, "--model", "ok", "-c", "1,2", "-n", "40", "--input-len", "8:64",
            "--output-len", "6", "--warmup", "1", "--slo", "ttft=500ms", "--peak-rps", "100",
            "--out", str(d / "sweep.json"), "-q",
        )  # fmt: skip
        assert p.returncode in FINISHED, p.stderr
        p = tokenpace(
            "bench", "--url", srv.url, "--model", "cut", "-c", "2", "-n", "6", "--input-len", "16",
            "--output-len", "8", "--out", str(d / "run.json"), "-q",
        )  # fmt: skip
        assert p.returncode == 4, p.stderr  # every stream was cut: no request succeeded
    for name in ("sweep", "run"):
        p = tokenpace(
            "report", str(d / f"{name}.json"), "--html", str(d / f"{name}.html"),
            "--md", str(d / f"{name}.md"), "--csv", str(d / f"{name}.csv"),
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
    return d


def figures(page: str) -> int:
    found = re.search(r'data-figures="(\d+)"', page)
    assert found is not None, "the page says how many figures it has"
    return int(found.group(1))


def test_html_is_self_contained_and_marks_the_plan(made):
    page = (made / "sweep.html").read_text()
    packed = re.search(r'<script type="application/gzip;base64" id="tp-plotly">([^<]+)</script>', page)
    assert packed and gzip.decompress(base64.b64decode(packed.group(1))).decode() == get_plotlyjs()
    assert len(page.encode()) < 2.5e6  # plotly.js inline but gzipped: not 5 MB a report
    ours = page.replace(packed.group(1), "")
    assert "<script src" not in ours and "cdn." not in ours and "<link" not in ours
    assert figures(page) == 13  # 4 curves against load, 6 distributions, timeline, prefill, errors
    for text in ("knee", "safe watermark", "SLO 500 ms", "TTFT CDF", "TTFT over the run", "prefill slope"):
        assert text in page
    assert "Replicas for a peak of 100 req/s" in page
    run = (made / "run.html").read_text()
    assert figures(run) == 9 and "Headline" in run and "Test conditions" in run
    assert "stream_interrupted" in run  # the errors-by-kind chart has them


def test_markdown_and_csv_carry_the_same_step_table(made):
    doc = json.loads((made / "sweep.json").read_text())
    md = (made / "sweep.md").read_text()
    assert "| step | load | req/s |" in md and "| 1 | c=1 |" in md and "| 2 | c=2 |" in md
    assert "## Capacity" in md and "## Test conditions" in md
    rows = list(csv.DictReader(io.StringIO((made / "sweep.csv").read_text())))
    assert [r["load"] for r in rows] == ["c=1", "c=2"]
    for row, step in zip(rows, doc["steps"], strict=True):
        assert float(row["TTFT p95"]) == pytest.approx(step["summary"]["ttft_ms"]["p95"], abs=1e-3)
        steady = step["summary"]["steady"]
        assert float(row["req/s"]) == pytest.approx(steady["request_throughput"], abs=1e-3)
        assert float(row["req/s whole run"]) == pytest.approx(step["summary"]["request_throughput"], abs=1e-3)
        assert float(row["drain s"]) == pytest.approx(steady["excluded_drain_s"], abs=1e-3)


def test_run_exports_in_long_csv_and_markdown(made):
    doc = json.loads((made / "run.json").read_text())
    rows = list(csv.DictReader(io.StringIO((made / "run.csv").read_text())))
    err = [r for r in rows if r["metric"] == "error rate"]
    assert float(err[0]["value"]) == pytest.approx(doc["summary"]["error_rate"], abs=1e-4) and err[0]["value"]
    md = (made / "run.md").read_text()
    assert "## Latency" in md and "## Throughput" in md


def test_markdown_to_stdout_and_missing_records_still_report(made, tmp_path):
    p = tokenpace("report", str(made / "sweep.json"))
    assert p.returncode == 0 and "## Steps" in p.stdout
    shutil.copy(made / "run.json", tmp_path / "alone.json")  # its records file is not beside it
    p = tokenpace("report", str(tmp_path / "alone.json"), "--html", str(tmp_path / "a.html"))
    assert p.returncode == 0, p.stderr
    assert "not found" in p.stderr and "No records file found" in (tmp_path / "a.html").read_text()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    def bad(*args):
        p = tokenpace("report", *args)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr

    bad(str(tmp_path / "missing.json"))
    (tmp_path / "junk.json").write_text("{nope")
    bad(str(tmp_path / "junk.json"))
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    bad(str(tmp_path / "other.json"))
    (tmp_path / "empty.json").write_text(json.dumps({"kind": "sweep", "steps": []}))
    bad(str(tmp_path / "empty.json"))
