"""Every stored run of the same test teaches the noise between runs: runs grouped by target and
labels, NOT VALID runs and the sides' own runs left out, and a single-run check that decides a
+20 % TTFT P50 regression once the library holds earlier runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from baseline_fixtures import make_record

from tokenpace.adapters.store import Store, connect
from tokenpace.app.baseline.check import check
from tokenpace.app.baseline.library_noise import library_runs
from tokenpace.core.analysis.comparison.gate import parse_thresholds

CONDITIONS = {"model": "m", "endpoint": "http://a/v1", "api": "openai-chat",
              "load": {"mode": "closed_loop", "concurrency": 4, "requests": 200}}  # fmt: skip


def _save(store: Store, run_id: str, speed: float, rng: np.random.Generator, valid: bool = True,
          version: str = "1", started: str = "2026-01-01T00:00:00+00:00",
          load: float | None = None) -> None:  # fmt: skip
    conditions = CONDITIONS | {"started_at": started, "labels": {"version": version}}
    records = [make_record(i, 100.0 * speed * rng.lognormal(0, 0.05)) for i in range(200)]
    summary = {} if load is None else {"client": {"host": {"load_per_core": load}, "stalls": {"share": 0.0}}}
    store.save_run(run_id, conditions, summary, records, labels={"version": version}, valid=valid)


def test_runs_of_one_test_group_by_labels_and_leave_out_what_cannot_be_judged(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    rng = np.random.default_rng(1)
    for i in range(4):
        _save(store, f"v1run{i:07d}", 1.0, rng)
        _save(store, f"v2run{i:07d}", 1.2, rng, version="2")
    _save(store, "badrun000001", 1.0, rng, valid=False)
    like = store.get_run("v1run0000000")
    assert like is not None
    groups = library_runs(store, like, exclude=["v1run0000000"])
    assert sorted(sorted(g) for g in groups) == [
        [f"v1run{i:07d}" for i in range(1, 4)],
        [f"v2run{i:07d}" for i in range(4)],
    ]  # a version's runs are reruns of one server; the two versions are not pooled into one


def test_a_library_of_ten_earlier_runs_lets_a_single_run_check_decide(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    rng = np.random.default_rng(2)
    for i in range(10):  # the released server, measured night after night: speed wanders +-3 %
        _save(
            store,
            f"night{i:07d}",
            rng.uniform(0.97, 1.03),
            rng,
            started=f"2026-01-{i + 1:02d}T00:00:00+00:00",
        )
    store.set_baseline("prod", "night0000009")
    _save(
        store,
        "slow00000001",
        1.2 * rng.uniform(0.97, 1.03),
        rng,
        version="2",
        started="2026-02-01T00:00:00+00:00",
    )
    report = check(store, "prod", parse_thresholds("ttft.p50=5%"), candidate="slow00000001", resamples=300)
    item = report.items[0]
    assert item.outcome == "regressed", item.reason
    assert item.noise is not None and not item.noise.assumed and item.noise.runs == 9
    assert "upper bound of the" in item.noise.describe()
    assert "that 9 runs in 1 group(s) of the library showed" in item.noise.describe()


def test_a_not_valid_member_of_a_group_is_left_out_with_a_note_and_the_rest_decide(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    rng = np.random.default_rng(4)
    for i, valid in enumerate((True, False, True)):  # a busy CI runner spoiled the second run
        _save(store, f"cand{i:08d}", 1.3, rng, valid=valid, version="2")
    store.save_repeat_group("grp", [f"cand{i:08d}" for i in range(3)], CONDITIONS, "m", [])
    _save(store, "base00000001", 1.0, rng)
    store.set_baseline("prod", "base00000001")
    report = check(store, "prod", parse_thresholds("ttft.p50=5%"), candidate="cand00000000", resamples=200)
    assert report.run.runs_b == ["cand00000000", "cand00000002"]
    assert any("cand00000001 of the group left out: NOT VALID" in w for w in report.run.warnings)
    assert report.items[0].outcome == "regressed"


def test_a_library_recorded_on_a_quiet_host_is_no_evidence_for_runs_on_a_busy_one(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))
    rng = np.random.default_rng(5)
    for i in range(10):  # recorded on a quiet host: the runs barely move
        _save(store, f"night{i:07d}", rng.uniform(0.99, 1.01), rng, load=0.2,
              started=f"2026-01-{i + 1:02d}T00:00:00+00:00")  # fmt: skip
    _save(store, "base00000001", 1.0, rng, load=1.6, started="2026-02-01T00:00:00+00:00")
    _save(store, "cand00000001", 1.02, rng, version="2", load=1.6, started="2026-02-02T00:00:00+00:00")
    store.set_baseline("prod", "base00000001")
    report = check(store, "prod", parse_thresholds("ttft.p50=5%"), candidate="cand00000001", resamples=300)
    item = report.items[0]
    assert item.noise is not None and item.noise.assumed and item.noise.host == "busy"
    assert item.noise.elsewhere_sd is not None and item.noise.elsewhere_sd < 0.02
    assert "measured on a busy host" in item.noise.describe()
    assert item.outcome == "undecided"
    store.set_baseline("calm", "night0000008")  # both sides quiet: the quiet library counts
    calm = check(store, "calm", parse_thresholds("ttft.p50=5%"), candidate="night0000009", resamples=300)
    noise = calm.items[0].noise
    assert noise is not None and noise.host == "quiet" and not noise.assumed and noise.runs == 8
