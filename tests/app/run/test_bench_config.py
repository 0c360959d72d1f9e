"""``BenchConfig``: validated once per bench, by the job that owns the run, whichever way it starts."""

from __future__ import annotations

import pytest
from bench_factory import bench_config
from click.testing import CliRunner

from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.app.run.terms import parse_fail_on
from tokenpace.cli.bench.bench_cmd import bench
from tokenpace.cli.bench.sweep_cmd import sweep
from tokenpace.cli.library.ab_cmd import ab


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[BenchConfig]:
    seen: list[BenchConfig] = []
    original = BenchConfig.validate

    def counted(self: BenchConfig) -> None:
        seen.append(self)
        original(self)

    monkeypatch.setattr(BenchConfig, "validate", counted)
    return seen


# 3 (NOT VALID) when this shared machine is too busy for the client to keep up: the run still ran
RAN = (0, 3)
LOAD = ("--input-len", "8", "--output-len", "2", "--timeout", "5s", "--no-store", "--quiet")


def test_a_bench_validates_its_config_once(threaded_server, validations, tmp_path) -> None:
    args = ["--url", threaded_server.url, "--model", "ok", "--concurrency", "1", "--requests", "2"]
    r = CliRunner().invoke(bench, [*args, *LOAD, "--out", str(tmp_path / "r.json")])
    assert r.exit_code in RAN, r.output
    assert len(validations) == 1


def test_a_sweep_validates_each_step_once(threaded_server, validations, tmp_path) -> None:
    args = ["--url", threaded_server.url, "--model", "ok", "--concurrency", "1,2", "--requests", "2"]
    r = CliRunner().invoke(sweep, [*args, *LOAD, "--out", str(tmp_path / "s.json")])
    assert r.exit_code in RAN, r.output
    steps = [c for c in validations if c.labels.get("sweep_step")]
    assert len(steps) == 2 and len({id(c) for c in steps}) == 2  # one validation per step
    assert len(validations) - len(steps) <= 2  # the sweep's own: its base, and the probe it derives


def test_an_ab_validates_its_base_once(threaded_server, validations) -> None:
    url = threaded_server.url
    args = ["--a", url, "--b", url, "--model", "ok", "--blocks", "2", "--block-requests", "2"]
    r = CliRunner().invoke(ab, [*args, "--concurrency", "1", *LOAD])
    assert r.exit_code in (*RAN, 1), r.output
    assert len(validations) == 1


def test_a_bad_config_is_one_line_before_any_load(threaded_server) -> None:
    r = CliRunner().invoke(bench, ["--url", threaded_server.url, "--rate", "-1", "--requests", "2", *LOAD])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert not threaded_server.stats.truth  # nothing was sent


def test_a_gated_percentile_past_the_usual_four_is_measured_with_its_interval() -> None:
    plain = bench_config("http://127.0.0.1:1/v1", concurrency=1, fail_on=parse_fail_on("ttft.p95<1s"))
    assert plain.with_gate_percentiles() is plain  # P95 is in the summary already
    deep = bench_config("http://127.0.0.1:1/v1", concurrency=1, fail_on=parse_fail_on("ttft.p99.9<1s"))
    assert deep.with_gate_percentiles().percentiles == (50.0, 90.0, 95.0, 99.0, 99.9)
    asked = bench_config(
        "http://127.0.0.1:1/v1", concurrency=1, percentiles=(50.0,), fail_on=parse_fail_on("e2e.p75<1s")
    )
    assert asked.with_gate_percentiles().percentiles == (50.0, 75.0)


def test_a_goodput_gate_without_slo_lines_is_refused_before_any_load() -> None:
    cfg = bench_config(
        "http://127.0.0.1:1/v1", concurrency=1, requests=10, fail_on=parse_fail_on("goodput>1")
    )
    with pytest.raises(ValueError, match="give --slo"):
        cfg.validate()
