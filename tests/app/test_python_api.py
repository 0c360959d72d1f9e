"""tokenpace from Python: the README's snippet runs as written; one call returns the result, writes
files and stores the run only when asked, reports progress to an observer, and refuses a dead
target before any load."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.app.api import REFUSALS, BenchConfig, SweepConfig, run_bench, run_sweep
from tokenpace.app.baseline.store_ops import open_store
from tokenpace.core.record import RequestRecord, Status
from tokenpace.testing.procs import free_port

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    text = README.read_text()
    section = text.split("## Use it from Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "README's 'Use it from Python' has no python block"
    return match.group(1)


def test_readme_snippet_runs_against_the_simulator(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(readme_snippet(), "README.md", "exec"), names)
    printed = capsys.readouterr().out
    assert names["result"].conditions["target"] == "sim:default"
    assert names["config"].url == ""  # the caller's config is left as it was
    assert re.search(r"TTFT P95 \d+\.\d ms over 20 requests", printed), printed
    assert "stopped: completed" in printed
    assert list(tmp_path.iterdir()) == []  # nothing written unless asked


class Watcher:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.records: list[RequestRecord] = []

    def started(self, total, duration_s) -> None:
        self.calls.append(("started", total, duration_s))

    def record(self, record) -> None:
        self.records.append(record)

    def finished(self) -> None:
        self.calls.append(("finished",))


def config(url: str, **kw: Any) -> BenchConfig:
    return bench_config(url, **{"model": "ok", "output_len": "4", "timeout_s": 10.0, **kw})


def test_files_store_and_progress_when_asked(threaded_server, tmp_path):
    watcher = Watcher()
    out, db = tmp_path / "r.json", tmp_path / "runs.db"
    result = run_bench(
        config(threaded_server.url, concurrency=2, requests=6, warmup=1),
        out=out,
        store=str(db),
        progress=watcher,
    )
    assert len(result.records) == 7 and {r.status for r in result.records} == {Status.OK}
    assert watcher.calls == [("started", 7, None), ("finished",)]
    assert sorted(r.request_id for r in watcher.records) == sorted(r.request_id for r in result.records)
    doc = json.loads(out.read_text())
    assert doc["run_id"] == result.run_id and doc["records"]["count"] == 7
    assert len((tmp_path / "r.records.jsonl").read_text().splitlines()) == 7
    stored = open_store(str(db)).get_run(result.run_id)
    assert stored is not None and stored.record_count == 7


def test_defaults_fill_the_load_and_the_bound(threaded_server):
    result = run_bench(config(threaded_server.url, duration_s=0.3))
    load = result.conditions["load"]
    assert load["mode"] == "closed_loop" and load["concurrency"] == 16 and load["requests"] is None


def test_a_dead_target_is_refused_before_any_load():
    with pytest.raises(REFUSALS, match="cannot reach"):
        run_bench(config(f"http://127.0.0.1:{free_port()}/v1", concurrency=1, requests=1))


def test_run_sweep_returns_every_step(threaded_server, tmp_path):
    base = config(threaded_server.url, requests=4)
    result = run_sweep(SweepConfig(base=base, steps=[1, 2]), out=tmp_path / "sw.json")
    assert [s.load for s in result.steps] == [1, 2] and not result.interrupted
    assert all(len(s.result.records) == 4 for s in result.steps)
    assert json.loads((tmp_path / "sw.json").read_text())["kind"] == "sweep"
    assert (tmp_path / "sw.step02.records.jsonl").exists()
