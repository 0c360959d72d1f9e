"""The per-run prompt salt: a rerun with the same seed is not measured warm on what the first run
left in the engine's prefix cache; prefixes shared within a run stay shared; compare says why two
runs may not be comparable."""

from __future__ import annotations

import asyncio
from typing import Any

from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.app.run.workloads import WorkloadOptions
from tokenpace.core.analysis.comparison.conditions import cache_warnings, differing_fields
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.sim import SimServer


def _config(url: str, salt: str, **kw: Any) -> BenchConfig:
    defaults = {
        "model": None,
        "api": "completions",  # no chat template: server prompt tokens = asked
        "input_len": "256",
        "output_len": "2",
        "concurrency": 1,
        "requests": 6,
        "timeout_s": 20.0,
        "server_metrics": "off",
        "seed": 7,
    }
    return bench_config(url, prompt_salt=salt, **{**defaults, **kw})


def _two_runs(salt: str, **kw):
    """The same config twice against one engine; the engine's prefix-cache hits of the second run."""

    async def go():
        async with SimServer(seed=0) as srv:
            first = await BenchRun(_config(srv.url, salt, **kw)).run()
            hits_before = srv.engine.kv.hits
            second = await BenchRun(_config(srv.url, salt, **kw)).run()
            return first, second, srv.engine.kv.hits - hits_before

    return asyncio.run(go())


def test_unsalted_rerun_is_served_from_the_cache_the_first_run_left():
    _, second, hits = _two_runs("none")
    assert hits >= 6 * 256 * 0.9  # every prompt of the second run was found cached
    assert second.conditions["prompt_salt"] == "none"
    assert "prompt_salt" not in second.conditions["workload"]


def test_salted_rerun_with_the_same_seed_finds_nothing_cached():
    first, second, hits = _two_runs("auto")
    assert hits == 0
    salts = [r.conditions["workload"]["prompt_salt"] for r in (first, second)]
    assert salts[0]["text"] != salts[1]["text"] and salts[0]["tokens"] == SALT_TOKENS
    # the salt is counted: what was asked is what the server counted
    assert all(r.prompt_tokens_requested == 256 + SALT_TOKENS for r in second.records)
    assert all(r.prompt_tokens == r.prompt_tokens_requested for r in second.records)
    # the salt text differs by construction: not a condition that makes runs incomparable
    assert not [f for f, _, _ in differing_fields(first.conditions, second.conditions) if "salt" in f]


def test_a_fixed_key_repeats_the_salt():
    first, second, hits = _two_runs("team-baseline")
    assert first.conditions["workload"]["prompt_salt"] == second.conditions["workload"]["prompt_salt"]
    assert hits >= 6 * 256 * 0.9


def test_prefixes_shared_within_a_salted_run_stay_shared():
    opts = WorkloadOptions(prefix_len=256, prefixes=1)

    async def go():
        async with SimServer(seed=0) as srv:
            cfg = _config(srv.url, "auto", input_len=parse_length("32"), requests=8, workload_opts=opts)
            await BenchRun(cfg).run()
            return srv.engine.kv.hits

    assert asyncio.run(go()) >= 7 * 256 * 0.9  # every request after the first found the prefix


def test_compare_warns_when_salt_settings_or_hit_rates_differ():
    salted, unsalted = {"prompt_salt": "auto"}, {"prompt_salt": "none"}
    warm, cold = {"server": {"prefix_hit_rate": 0.97}}, {"server": {"prefix_hit_rate": 0.19}}
    assert any("prompt salt differs" in w for w in cache_warnings(salted, unsalted, {}, {}))
    assert any("hit rate differs" in w for w in cache_warnings(salted, salted, cold, warm))
    assert cache_warnings(salted, {"prompt_salt": "key"}, cold, cold) == []
