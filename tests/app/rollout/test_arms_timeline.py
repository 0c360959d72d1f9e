"""A gateway session's arms over time from the store: every stored request in a bucket, the share
moving when the split moved, the change a marker, each rollout step judged by the guards; and the
page written as one offline file (arms --html)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.rollout.arms_traffic import SESSION, store_rollout
from tokenpace.adapters.store import connect
from tokenpace.app.rollout.arms import ArmsQuery, load_window
from tokenpace.app.rollout.arms_timeline import arms_over_time, write_arms_html
from tokenpace.core.analysis.rollout.guards import parse_guards
from tokenpace.testing.procs import run_cli


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    path = tmp_path_factory.mktemp("arms") / "runs.db"
    started = store_rollout(connect(str(path)))
    return path, started


def test_every_stored_request_is_in_a_bucket_and_the_change_is_a_marker(rollout) -> None:
    path, started = rollout
    store = connect(str(path))
    doc = arms_over_time(
        store, ArmsQuery(started, guards=tuple(parse_guards("ttft.p95=+50%")), resamples=50)
    ).to_dict()
    timeline = doc["timeline"]
    arms = timeline["arms"]
    assert set(arms) == {"a", "b"}
    assert sum(sum(a["requests"]) for a in arms.values()) == 400  # every stored request, once
    (change,) = timeline["changes"]
    assert change["epoch"] == 1 and change["split_after"] == {"a": 50.0, "b": 50.0}
    # the shares drawn are the stored records' own, bucket by bucket
    window = load_window(store, ArmsQuery(started))
    width, start = timeline["bucket_s"], timeline["start_unix"]
    for arm, times in window.sent_unix.items():
        counts = [0] * len(timeline["t"])
        for t in times:
            counts[math.floor((t - start) / width)] += 1
        assert arms[arm]["requests"] == counts
    assert sum(sum(v for v in a["events"]["complaint"] if v) for a in arms.values()) > 0
    # two steps of the rollout, each judged on its own traffic
    assert len(doc["steps"]) == 2 and all(
        s["verdict"] in ("promote", "hold", "roll back") for s in doc["steps"]
    )
    assert doc["steps"][0]["until_unix"] == change["unix_s"] == doc["steps"][1]["since_unix"]
    assert all(g["guard"] == "ttft.p95=+50%" for s in doc["steps"] for g in s["guards"])


def test_an_empty_window_is_one_clear_line(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    with pytest.raises(ValueError, match="no gateway traffic stored in this window"):
        arms_over_time(store, ArmsQuery(0.0))


def test_arms_html_writes_one_offline_page(rollout, tmp_path: Path) -> None:
    path, _ = rollout
    out = tmp_path / "arms.html"
    done = run_cli(
        "arms", "--store", str(path), "--since", "1d", "--session", SESSION, "--guard", "ttft.p95=+50%",
        "--resamples", "50", "--html", str(out),
    )  # fmt: skip
    assert done.returncode in (0, 1, 5) and "Traceback" not in done.stderr, done.stderr
    assert f"wrote {out}" in done.stderr
    page = out.read_text()
    assert page.count('id="tp-fig-') == 7 and "Traffic share by arm" in page and "epoch 1" in page
    assert "http://" not in page.split('id="tp-plotly"')[0].replace("http://www.w3.org", "")
    refused = run_cli("arms", "--store", str(path), "--since", "1d", "--html", str(tmp_path))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_write_arms_html_refuses_a_folder(rollout, tmp_path: Path) -> None:
    path, started = rollout
    doc = arms_over_time(connect(str(path)), ArmsQuery(started, resamples=50)).to_dict()
    with pytest.raises(Exception, match="--html"):
        write_arms_html(tmp_path, doc)


def test_report_arms_writes_the_consoles_rollout_page_offline(rollout, tmp_path: Path) -> None:
    path, _ = rollout
    out = tmp_path / "rollout.html"
    done = run_cli("report", "--arms", SESSION, "--store", str(path), "--html", str(out))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    page = out.read_text()
    assert f"Gateway session {SESSION}" in page and 'data-title="Traffic share by arm"' in page
    assert "<script src=" not in page  # plotly and the console's script are inside the file
    missing = run_cli("report", "--arms", "nope", "--store", str(path), "--html", str(tmp_path / "x.html"))
    assert missing.returncode == 2 and "no stored gateway session" in missing.stderr
    both = run_cli("report", "--arms", SESSION, "--history", "x", "--store", str(path), "--html", str(out))
    assert both.returncode == 2 and "Traceback" not in both.stderr
