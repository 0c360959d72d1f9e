"""Comparing stored runs from the figures saved with them: a saved or imported run keeps its
figures; the verdicts are those of ``compare_runs`` (the bootstrap over the records, the library's
noise learned from records) on a regressed, a faster, an unchanged and an undecided pair; without
a run's figures (a side or one of the library's reruns) there is no stored comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from baseline_fixtures import make_record
from bench_factory import bench_config

from tokenpace.adapters.store import Store, connect
from tokenpace.app.api import run_bench
from tokenpace.app.baseline.compare import compare_runs
from tokenpace.app.baseline.store_ops import export_run, import_result, open_store
from tokenpace.app.baseline.stored_compare import compare_stored
from tokenpace.core.analysis.comparison.stored_levels import STORED_METHOD, run_levels
from tokenpace.core.analysis.evidence.samples import metric_samples
from tokenpace.core.metrics import summarize

CONDITIONS = {
    "model": "m", "endpoint": "http://127.0.0.1:9/v1", "api": "openai-chat",
    "load": {"mode": "closed_loop", "concurrency": 4, "requests": 200},
    "workload": {"input_len": {"spec": "128"}, "output_len": {"spec": "8"}},
}  # fmt: skip


def _save(
    store: Store, run_id: str, day: int, ttft: float, seed: int, figures: bool = True, version: str = "1"
) -> None:
    rng = np.random.default_rng(seed)
    records = [make_record(i, ttft * rng.lognormal(0, 0.05), 10 * rng.lognormal(0, 0.02)) for i in range(200)]
    conditions = CONDITIONS | {"started_at": f"2026-01-{day:02d}T00:00:00+00:00"}
    store.save_run(
        run_id, conditions, summarize(records).to_dict(), records, labels={"test": "t", "version": version}
    )
    if figures:
        store.save_levels(run_id, run_levels(records))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = connect(f"sqlite:///{tmp_path_factory.mktemp('stored') / 'runs.db'}")
    for day in range(1, 21):  # reruns of an unchanged server: the library learns its noise
        _save(s, f"night{day:02d}", day, 100.0 * (1 + 0.005 * (day % 3)), day)
    _save(s, "slow", 25, 135.0, 25, version="2")  # another server: not a rerun
    yield s
    s.close()


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [("night01", "slow", "slower"), ("slow", "night01", "faster"), ("night02", "night05", "negligible")],
)
def test_stored_figures_decide_as_compare_does(store: Store, a: str, b: str, verdict: str) -> None:
    stored = compare_stored(store, a, b)
    exact = compare_runs(store, a, b)
    assert stored is not None and stored.comparison.method == STORED_METHOD
    got = {m.metric: m.verdict for m in stored.comparison.metrics}
    assert got == {m.metric: m.verdict for m in exact.comparison.metrics}
    assert stored.warnings == exact.warnings and stored.runs_a == exact.runs_a == [a]
    assert got["ttft"].value == verdict


def test_undecided_with_the_noise_assumed(tmp_path: Path) -> None:
    s = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    _save(s, "a", 1, 100.0, 1)
    _save(s, "b", 2, 107.0, 2)
    stored, exact = compare_stored(s, "a", "b"), compare_runs(s, "a", "b")
    assert stored is not None
    assert stored.comparison.metric("ttft").verdict == exact.comparison.metric("ttft").verdict
    assert stored.comparison.metric("ttft").verdict.value == "undecided"
    assert stored.warnings == exact.warnings and any("assumed" in w for w in stored.warnings)


def test_no_stored_comparison_without_every_runs_figures(tmp_path: Path) -> None:
    s = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    for day in (1, 2):
        _save(s, f"lib{day}", day, 100.0, day, figures=day == 1)  # a rerun saved without figures
    _save(s, "a", 3, 100.0, 3)
    _save(s, "b", 4, 100.0, 4)
    _save(s, "bare", 5, 100.0, 5, figures=False)
    assert compare_stored(s, "a", "bare") is None  # a side
    assert compare_stored(s, "a", "b") is None  # the library's reruns
    assert compare_stored(s, "a", "b", percentiles=(75.0,)) is None  # not a stored percentile


def test_a_saved_bench_run_keeps_its_figures(threaded_server, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    cfg = bench_config(threaded_server.url, model="ok", output_len="4", concurrency=2, requests=24)
    result = run_bench(cfg, store=str(db))
    levels = open_store(str(db)).run_levels([result.run_id])[result.run_id]
    ttfts = metric_samples(result.records, "ttft").values
    assert levels["ttft.p50"].n == len(ttfts) == 24
    assert levels["ttft.p50"].value == pytest.approx(float(np.percentile(ttfts, 50)))
    assert levels["e2e.p99"].n_eff <= 24


def test_an_imported_run_gets_its_figures(tmp_path: Path) -> None:
    old = connect(f"sqlite:///{tmp_path / 'old.db'}")
    _save(old, "night01", 1, 100.0, 1, figures=False)  # stored before runs kept their figures
    run = old.get_run("night01")
    assert run is not None and old.run_levels(["night01"]) == {}
    out, _, _ = export_run(old, run, tmp_path / "night01.json")
    new = connect(f"sqlite:///{tmp_path / 'new.db'}")
    import_result(new, out)
    levels = new.run_levels(["night01"])["night01"]
    assert levels == {v.key: v for v in run_levels(old.load_records("night01"))}
