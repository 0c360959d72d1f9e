"""`tokenpace arms` on gateway traffic whose arms ran at different loads: exit 2 (hold), every
latency guard undecided with the reason and each arm's load, in the console and in the JSON; the
canary judged against its baseline (`--baseline`, `--candidate`) is promoted."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import orjson
from click.testing import CliRunner
from core.analysis.rollout.test_load_match import arm_records

from tokenpace.adapters.store import connect
from tokenpace.cli.gateway.arms_cmd import arms
from tokenpace.core.record import RequestRecord

GUARD = "ttft.p50=+10%,ttft.p95=+10%"


def _store(path: Path, arms_at: dict[str, tuple[float, int]], weights: dict[str, float]) -> str:
    """One stored gateway session: per arm, requests at a Poisson load (mean, count), sent within
    the last few minutes."""
    url = str(path / "runs.db")
    store = connect(url)
    now_ns = time.time_ns() - 300 * 10**9
    started = datetime.fromtimestamp(now_ns / 1e9, timezone.utc).isoformat()
    split = [{"arm": a, "weight": w} for a, w in weights.items()]
    rng = np.random.default_rng(11)
    for arm, (load, n) in arms_at.items():
        records: list[RequestRecord] = arm_records(rng, arm, rng.poisson(load, n))
        conditions = {
            "started_at": started,
            "clock": {"perf_ns": 0, "unix_ns": now_ns},
            "gateway": {"split": split},
        }
        labels = {"source": "gateway", "arm": arm, "gateway_session": "s1", "config_epoch": "0"}
        store.save_run(f"gw-s1-{arm}", conditions, {}, records, kind="gateway", labels=labels)
    return url


def test_arms_at_different_loads_hold_with_the_reason_and_the_loads(tmp_path: Path) -> None:
    url = _store(tmp_path, {"prod": (19.0, 1900), "cand": (1.0, 100)}, {"prod": 95, "cand": 5})
    done = CliRunner().invoke(arms, ["--store", url, "--guard", GUARD, "--resamples", "50", "--json"])
    assert done.exit_code == 5, done.output
    report = orjson.loads(done.output)
    assert report["verdict"] == "hold"
    latency = [g for g in report["guards"] if g["guard"].startswith("ttft")]
    assert [g["outcome"] for g in latency] == ["undecided", "undecided"]
    assert all("different loads" in g["reason"] and g["change"] is None for g in latency)
    load = report["diffs"][0]["load"]
    assert load["state"] == "unmatched" and load["reference"]["inflight_median"] >= 15
    assert load["candidate"]["inflight_p90"] <= 4
    rows = [p for m in report["diffs"][0]["latency"]["metrics"] for p in m["percentiles"]]
    assert {p["verdict"] for p in rows} <= {"undecided", "too few samples"}

    console = CliRunner().invoke(
        arms, ["--store", url, "--guard", GUARD, "--resamples", "50"], env={"COLUMNS": "200"}
    )
    assert console.exit_code == 5
    text = console.output
    assert "load at dispatch (cand against prod): the arms ran at different loads (prod median" in text
    assert "in flight p50/p90" in text and "VERDICT: HOLD" in text
    assert "faster" not in text and "slower" not in text


def test_the_canary_is_judged_against_its_baseline(tmp_path: Path) -> None:
    arms_at = {"prod": (19.0, 1800), "baseline": (1.0, 1000), "canary": (1.0, 1000)}
    url = _store(tmp_path, arms_at, {"prod": 1.8, "baseline": 1, "canary": 1})
    args = [
        "--store",
        url,
        "--guard",
        GUARD,
        "--resamples",
        "50",
        "--baseline",
        "baseline",
        "--candidate",
        "canary",
    ]
    done = CliRunner().invoke(arms, [*args, "--json"])
    report = orjson.loads(done.output)
    assert done.exit_code == 0 and report["verdict"] == "promote", report["reason"]
    assert report["reference"] == "baseline" and report["candidate"] == "canary"
    assert [d["arm"] for d in report["diffs"]] == ["canary"]
    assert report["diffs"][0]["load"]["state"] == "matched"
    bad = CliRunner().invoke(arms, ["--store", url, "--baseline", "baseline", "--candidate", "canry"])
    assert bad.exit_code == 2 and bad.output.startswith("tokenpace arms: error: no arm 'canry'")
