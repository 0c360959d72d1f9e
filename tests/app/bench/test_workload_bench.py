"""Real workloads end to end through BenchRun: datasets, log lengths, traces, shared prefixes,
multi-turn sessions and tokenizers, against the scripted server and the simulated engine."""

import asyncio
import itertools
import json
from typing import Any

import numpy as np
import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.app.run.workloads import TRACE_ARRIVAL, WorkloadOptions
from tokenpace.cli.bench import workload_opts
from tokenpace.core.record import Status
from tokenpace.core.trace_sample import trace_sampled
from tokenpace.core.workload import WORDS, DatasetEntry, TraceRow
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import SimServer
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.wire import tracecontext as tc

FAST = Script(ttft_s=0.005, itl_s=0.001)


def config(url: str, opts: WorkloadOptions | None = None, **kw: Any) -> BenchConfig:
    defaults = {"input_len": "16", "output_len": "4", "timeout_s": 10.0, "concurrency": 2, "requests": 12,
                "server_metrics": "off", "prompt_salt": "none"}  # fmt: skip
    # prompt_salt none: exact lengths below; the salt is tested in test_prompt_salt.py
    return bench_config(url, workload_opts=opts, **{**defaults, **kw})


def run_scripted(cfg_kw, script=FAST):
    async def go():
        async with ScriptedServer(script) as srv:
            return await BenchRun(config(srv.url, **cfg_kw)).run()

    return asyncio.run(go())


def run_sim(cfg_kw):
    async def go():
        async with SimServer(seed=0) as srv:
            result = await BenchRun(config(srv.url, model=None, **cfg_kw)).run()
            return result, srv

    return asyncio.run(go())


def test_dataset_prompts_are_sent_and_counted_by_the_server():
    entries = [DatasetEntry(turns=(" ".join(WORDS[: 5 + i]),), output_len=3) for i in range(6)]
    result = run_scripted({"opts": WorkloadOptions(dataset=entries, source={"dataset": "x.jsonl"})})
    ok = [r for r in result.records if r.status is Status.OK]
    assert len(ok) == 12
    assert all(r.prompt_tokens == r.prompt_tokens_requested for r in ok)  # scripted server counts words
    assert {r.prompt_tokens for r in ok} == {5, 6, 7, 8, 9, 10}
    assert all(r.output_tokens == 3 for r in ok)
    assert result.conditions["workload"]["kind"] == "dataset"
    assert result.conditions["workload"]["tokenizer"]["kind"] == "estimate"
    summary = result.to_dict()["summary"]
    assert summary["prompt_tokens_check"]["mismatch"] is False
    assert summary["breakdown"]["length_bins"]["cells"][0]["n"] == 12


def test_lengths_from_log_report_the_fit():
    log = np.array([[20, 2], [60, 6]] * 10)
    result = run_scripted({"opts": WorkloadOptions(length_pairs=log), "requests": 40, "concurrency": 8})
    pairs = {(r.prompt_tokens, r.output_tokens) for r in result.records}
    assert pairs == {(20, 2), (60, 6)}
    fit = result.to_dict()["summary"]["length_fit"]
    assert fit["log_pairs"] == 20 and fit["sampled_pairs"] == 40
    assert fit["correlation"]["sampled"] == pytest.approx(1.0)


def test_trace_replays_on_its_own_clock_with_speedup():
    rows = [TraceRow(t, 8, 2) for t in (100.0, 100.2, 100.6, 101.0)]
    opts = WorkloadOptions(trace=rows, speedup=2.0)
    result = run_scripted(
        {
            "opts": opts,
            "rate": opts.trace_rate(),
            "concurrency": None,
            "arrival": TRACE_ARRIVAL,
            "requests": 4,
        }
    )
    recs = sorted(result.records, key=lambda r: r.index)
    t0 = recs[0].scheduled_ns
    assert [round((r.scheduled_ns - t0) / 1e6) for r in recs] == [0, 100, 300, 500]
    assert result.conditions["load"]["arrival"] == "trace"
    assert (
        result.conditions["workload"]["kind"] == "trace" and result.conditions["workload"]["speedup"] == 2.0
    )


def test_multi_turn_sessions_send_the_history_with_the_answers():
    opts = WorkloadOptions(turns=3, think_time_s=0.01)
    result = run_scripted({"opts": opts, "requests": 12, "concurrency": 2})
    recs = result.records
    assert len(recs) == 12 and all(r.status is Status.OK for r in recs)
    assert sorted(r.turn for r in recs) == [0] * 4 + [1] * 4 + [2] * 4
    for r in recs:
        # the scripted server counts every word of every message: the history came with each turn,
        # with the answers the server streamed (4 " tok" words each)
        assert r.prompt_tokens == r.prompt_tokens_requested == 16 * (r.turn + 1) + 4 * r.turn
    sessions = {}
    for r in sorted(recs, key=lambda r: r.index):
        sessions.setdefault(r.session, []).append(r)
    for turns in sessions.values():
        assert [r.turn for r in turns] == [0, 1, 2]
        assert all(b.sent_ns >= a.end_ns + 10_000_000 for a, b in itertools.pairwise(turns))  # think time
    by_turn = result.to_dict()["summary"]["breakdown"]["turns"]
    assert [t["turn"] for t in by_turn] == [0, 1, 2] and all(t["n"] == 4 for t in by_turn)


def test_each_turn_of_a_session_sends_its_own_sampled_traceparent():
    share, seed = 0.5, 7

    async def go():
        async with ScriptedServer(FAST) as srv:
            opts = WorkloadOptions(turns=3, think_time_s=0.0)
            cfg = config(srv.url, opts, requests=12, seed=seed, otlp_sample=share)
            cfg.otlp_endpoint = "http://127.0.0.1:1/v1/traces"  # spans are exported by the job, not here
            return await BenchRun(cfg).run(), list(srv.stats.headers)

    result, headers = asyncio.run(go())
    sent = {h["x-request-id"].decode(): h for h in headers if "x-request-id" in h}  # not the model GET
    recs = result.records
    assert len(recs) == 12 and {r.turn for r in recs} == {0, 1, 2}
    assert len({r.trace_id for r in recs}) == 12  # one trace per request, a turn's too (its root)
    for r in recs:
        value = sent[r.request_id]["traceparent"].decode()
        assert tc.parse_traceparent(value) == (r.trace_id, r.span_id)
        assert tc.is_sampled(value) is r.trace_sampled is trace_sampled(seed, r.index, share)
    assert {r.trace_sampled for r in recs} == {True, False}  # this seed samples some, not all


def test_multi_turn_open_loop_starts_sessions_at_the_rate():
    opts = WorkloadOptions(turns=2)
    result = run_scripted(
        {"opts": opts, "requests": 8, "rate": 50.0, "concurrency": None, "arrival": "constant"}
    )
    assert len(result.records) == 8 and {r.session for r in result.records} == {0, 1, 2, 3}


def test_shared_prefixes_hit_the_sims_prefix_cache_and_split_cold_from_warm():
    opts = WorkloadOptions(prefix_len=256, prefixes=2)
    result, srv = run_sim({"opts": opts, "requests": 10, "concurrency": 1, "input_len": parse_length("32")})
    recs = result.records
    assert {r.prefix_id for r in recs} == {0, 1}
    assert sum(r.prefix_cold for r in recs) == 2
    assert all(r.prompt_tokens_requested == 288 for r in recs)
    assert srv.engine.kv.hits >= 8 * 256 * 0.9  # warm requests found their prefix cached
    state = result.to_dict()["summary"]["breakdown"]["prefix"]
    assert state["cold"]["n"] == 2 and state["warm"]["n"] == 8


def test_server_tokenizer_is_resolved_before_the_load(tmp_path):
    opts = WorkloadOptions(server_tokenizer=True)
    result, _ = run_sim({"opts": opts, "requests": 4, "api": "completions"})
    tok = result.conditions["workload"]["tokenizer"]
    assert tok["kind"] == "server" and tok["source"].endswith("/tokenize")
    assert all(r.prompt_tokens == r.prompt_tokens_requested == 16 for r in result.records)


def test_chat_template_overhead_is_information_not_a_warning():
    result, _ = run_sim({"requests": 4})  # the sim adds 7 template tokens to a 16-token chat prompt
    check = result.to_dict()["summary"]["prompt_tokens_check"]
    assert check["mismatch"] is False and check["server_over_asked"] == pytest.approx(23 / 16)
    assert check["template_overhead_tokens"] == 7
    assert not any("prompt tokens" in w for w in result.warnings)


def train_tokenizer(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    rng = np.random.default_rng(0)
    text = [" ".join(rng.choice(WORDS, 40)) for _ in range(300)]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]"]))
    tok.save(str(path))
    return tok


def test_local_tokenizer_makes_prompts_of_the_exact_length(tmp_path):
    tok = train_tokenizer(tmp_path / "tokenizer.json")
    opts = workload_opts.options_from({"tokenizer": str(tmp_path)})  # a model folder holding one
    result = run_scripted({"opts": opts, "input_len": parse_length("10:60"), "requests": 10})
    wl = result.conditions["workload"]
    assert wl["tokenizer"]["kind"] == "tokenizer" and wl["tokenizer"]["exact"] is True
    for r in result.records:
        assert 10 <= r.prompt_tokens_requested <= 60
    # the prompts the workload made count exactly as asked by the real tokenizer
    from tokenpace.app.run.workloads import build

    it = build(opts, parse_length("10:60"), parse_length("4"), 0).items()
    for _ in range(20):
        item = next(it)
        assert len(tok.encode(item.prompt, add_special_tokens=False).ids) == item.input_tokens


def test_options_from_reads_files(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps({"prompt": "a b c"}) + "\n")
    opts = workload_opts.options_from(
        {"dataset": f, "prefix_len": 4, "prefixes": 2, "turns": 2, "think_time": "1s"}
    )
    assert opts.dataset[0].turns == ("a b c",) and opts.think_time_s == 1.0 and opts.sessions
    with pytest.raises(ValueError, match="give one"):
        workload_opts.options_from({"dataset": f, "lengths_from": f})


def test_server_tokenizer_without_tokenize_stops_before_the_load():
    from tokenpace.app.watch.preflight import PreflightError

    async def go():
        async with ScriptedServer(FAST) as srv:
            with pytest.raises(PreflightError, match="/tokenize"):
                await BenchRun(config(srv.url, WorkloadOptions(server_tokenizer=True))).run()
            return srv.stats.truth

    assert asyncio.run(go()) == {}  # no generation request reached the server
