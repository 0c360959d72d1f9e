"""bench's TTFAT, token provenance and chunk-token counts, end to end against the simulator."""

import asyncio

import pytest

from tokenpace.app.bench.bench import BenchConfig, BenchRun
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import SimServer, get_profile
from tokenpace.wire.dialects.base import Sampling


def bench_sim(requests=6, output_len="12", **engine):
    profile = get_profile().with_overrides(engine=engine)

    async def go():
        async with SimServer(profile) as srv:
            cfg = BenchConfig(
                url=srv.url,
                model="m",
                input_len=parse_length("16"),
                output_len=parse_length(output_len),
                timeout_s=20.0,
                concurrency=2,
                requests=requests,
                sampling=Sampling(ignore_eos=True),
                server_metrics="off",
            )
            return await BenchRun(cfg).run()

    return asyncio.run(go())


def test_reasoning_phase_gives_ttfat_after_ttft_and_counts_reasoning_chunks():
    result = bench_sim(reasoning_tokens=5)
    ok = [r for r in result.records if not r.warmup]
    assert len(ok) == 6 and all(r.status.value == "ok" for r in ok)
    for r in ok:
        assert r.reasoning_chunks == 5 and r.output_tokens_counted == 12
        assert r.first_answer_ns > r.first_token_ns  # the answer starts after five reasoning tokens
        assert r.token_ns.index(r.first_answer_ns) == 5
        assert r.output_tokens_server == 12 and r.output_tokens_source.value == "server"
    s = result.summary
    assert s.reasoning and s.ttfat_ms.n == 6 and s.ttfat_ms.p50 > s.ttft_ms.p50


def test_without_reasoning_no_ttfat_is_reported():
    s = bench_sim().summary
    assert not s.reasoning and s.ttfat_ms.n == 0


def test_multi_token_chunks_are_counted_as_chunks_and_sized_by_the_servers_usage():
    result = bench_sim(tokens_per_chunk=4, usage_every_chunk=True, output_len="10")
    for r in result.records:
        assert r.output_tokens_counted == 3  # chunks of 4, 4, 2 tokens
        assert r.chunk_tokens == [4, 4, 2] and r.output_tokens == 10
        assert len(r.token_ns) == 3
    tokens = result.summary.tokens
    assert tokens.compared == 6 and tokens.mismatched == 6  # counted chunks differ from usage: said so


def bench_api(api, stream=True, **engine):
    profile = get_profile().with_overrides(engine=engine)

    async def go():
        async with SimServer(profile) as srv:
            cfg = BenchConfig(
                url=srv.url,
                api=api,
                stream=stream,
                input_len=parse_length("16"),
                output_len=parse_length("8"),
                timeout_s=20.0,
                concurrency=2,
                requests=4,
                server_metrics="off",
            )
            return await BenchRun(cfg).run()

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["anthropic", "responses"])
@pytest.mark.parametrize("stream", [True, False])
def test_bench_in_each_streaming_dialect_with_reasoning(api, stream):
    result = bench_api(api, stream=stream, reasoning_tokens=3)
    assert [r.status.value for r in result.records] == ["ok"] * 4, [r.error for r in result.records]
    for r in result.records:
        assert r.output_tokens_server == 8 and r.prompt_tokens and r.finish_reason
        if stream:
            assert r.output_tokens_counted == 8 and r.reasoning_chunks == 3
            assert r.token_ns.index(r.first_answer_ns) == 3
        else:
            assert r.first_token_ns == r.first_answer_ns == r.end_ns
    s = result.summary
    assert s.ttft_ms.n == 4 and s.tokens.mismatched == 0
    assert s.reasoning == stream  # a whole response has no reasoning chunks to count


def test_bench_embeddings_reports_inputs_and_tokens_per_second():
    result = bench_api("embeddings")
    assert [r.status.value for r in result.records] == ["ok"] * 4, [r.error for r in result.records]
    for r in result.records:
        assert r.output_tokens == 0 and r.prompt_tokens == r.prompt_tokens_requested
        assert r.first_token_ns == r.end_ns
    s = result.summary
    assert s.request_throughput > 0 and s.output_token_throughput == 0
    mean_input = sum(r.prompt_tokens for r in result.records) / 4
    assert s.total_token_throughput == pytest.approx(s.request_throughput * mean_input)


def test_bench_over_realtime_websocket_sessions():
    result = bench_api("realtime", tokens_per_chunk=2)
    assert [r.status.value for r in result.records] == ["ok"] * 4, [r.error for r in result.records]
    for r in result.records:
        assert r.output_tokens_server == 8 and r.output_tokens_counted == 4  # 2 tokens per event
        assert r.first_token_ns == r.first_answer_ns and r.http_status == 101
        assert r.finish_reason == "max_output_tokens" and r.prompt_tokens
    assert sum(r.connect_ns is not None for r in result.records) == 2  # two users, a session each
    assert result.summary.ttft_ms.n == 4
