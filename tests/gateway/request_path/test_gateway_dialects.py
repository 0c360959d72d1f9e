"""Every API through the gateway, called by the official SDKs' own helpers, is measured: a record per
request (TTFT, TTFAT where there is reasoning, tokens, outcome) and /metrics series by ``api``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from tokenpace.core.metrics import tpot_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.sim import SimServer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

CHAT = [{"role": "user", "content": "think then answer"}]
USAGE: Any = {"include_usage": True}  # an OpenAI stream carries usage only when asked
THINK = {"reasoning_tokens": 2}  # the sim's first two tokens are reasoning: TTFAT after TTFT


class Through:
    """The SDK clients pointed at the gateway, and what the gateway recorded."""

    def __init__(self, gw: RunningGateway) -> None:
        self.gw = gw
        self.records: list[RequestRecord] = []
        self.openai = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="sk-test", max_retries=0)
        self.anthropic = anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-test", max_retries=0)

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as s, s.get(self.gw.url + "/metrics") as r:
            return await r.text()


def through_gateway(fn: Callable[[Through], Awaitable[Any]]) -> tuple[Any, list[RequestRecord], str]:
    """Runs ``fn`` with SDK clients through a gateway in front of a fresh sim."""

    async def main() -> tuple[Any, list[RequestRecord], str]:
        async with SimServer(port=0) as srv:
            config = GatewayConfig(upstreams=(parse_upstream(f"sim={srv.url}"),), port=0)
            records: list[RequestRecord] = []
            async with RunningGateway(config, on_record=records.append) as gw:
                t = Through(gw)
                t.records = records
                async with t.openai, t.anthropic:
                    out = await fn(t)
                return out, records, await t.metrics()

    return asyncio.run(asyncio.wait_for(main(), 60))


def measured(rec: RequestRecord, api: str, output_tokens: int) -> None:
    assert rec.labels["api"] == api and rec.labels["outcome"] == "ok" and rec.status is Status.OK
    ttft = ttft_ns(rec)
    assert rec.first_token_ns is not None and ttft is not None and ttft > 0
    assert rec.prompt_tokens and rec.prompt_tokens > 0
    assert rec.output_tokens_server == output_tokens


def reasoned_first(rec: RequestRecord) -> None:
    """The first two token events were reasoning, so TTFAT is not before TTFT (equal when one read
    held both, as under load)."""
    assert rec.first_answer_ns is not None and rec.first_token_ns is not None
    assert rec.reasoning_chunks == 2 and rec.first_answer_ns >= rec.first_token_ns


def series(prom: str, name: str, api: str) -> float:
    total = 0.0
    for line in prom.splitlines():
        if line.startswith(name + "{") and f'api="{api}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_openai_chat_and_completions_streamed_and_whole() -> None:
    async def go(t: Through) -> None:
        stream = await t.openai.chat.completions.create(
            model="m", messages=CHAT, max_tokens=5, stream=True, stream_options=USAGE, extra_body=THINK
        )
        assert [c async for c in stream]
        whole = await t.openai.chat.completions.create(model="m", messages=CHAT, max_tokens=3)
        assert whole.usage is not None and whole.usage.completion_tokens == 3
        text = await t.openai.completions.create(
            model="m", prompt="once upon", max_tokens=4, stream=True, stream_options=USAGE
        )
        assert [c async for c in text]
        await t.openai.completions.create(model="m", prompt="once upon", max_tokens=2)

    _, records, prom = through_gateway(go)
    chat_stream, chat_whole, text_stream, text_whole = records
    measured(chat_stream, "chat", 5)
    reasoned_first(chat_stream)
    assert len(chat_stream.token_ns) >= 4  # a timestamp per token-carrying chunk
    measured(chat_whole, "chat", 3)
    measured(text_stream, "completions", 4)
    measured(text_whole, "completions", 2)
    assert series(prom, "tokenpace_gateway_requests_total", "chat") == 2
    assert series(prom, "tokenpace_gateway_requests_total", "completions") == 2
    assert series(prom, "gen_ai_server_time_to_first_token_seconds_count", "completions") == 2


def test_openai_responses_create_and_the_stream_helper() -> None:
    async def go(t: Through) -> tuple[Any, Any]:
        stream = await t.openai.responses.create(
            model="m", input="hi", max_output_tokens=5, stream=True, extra_body=THINK
        )
        assert [e async for e in stream][-1].type == "response.incomplete"  # its own limit reached
        # The helper needs response.completed: no limit of its own, the model stops by itself.
        async with t.openai.responses.stream(model="m", input="hi", extra_body=THINK) as helper:
            final = await helper.get_final_response()
        whole = await t.openai.responses.create(model="m", input="hi", max_output_tokens=3)
        return final, whole

    (final, whole), records, prom = through_gateway(go)
    limited, helped, whole_rec = records
    measured(limited, "responses", 5)
    reasoned_first(limited)
    assert limited.finish_reason == "max_output_tokens"
    assert final.status == "completed" and final.output_text
    measured(helped, "responses", final.usage.output_tokens)
    assert helped.finish_reason == "completed"
    reasoned_first(helped)
    measured(whole_rec, "responses", 3)
    assert whole.usage.output_tokens == 3
    assert series(prom, "tokenpace_gateway_requests_total", "responses") == 3
    assert series(prom, "gen_ai_server_time_to_first_token_seconds_count", "responses") == 3


def test_openai_embeddings_one_input_and_a_batch() -> None:
    async def go(t: Through) -> tuple[Any, Any]:
        one = await t.openai.embeddings.create(model="m", input="hello embedded world")
        batch = await t.openai.embeddings.create(model="m", input=["first input", "the second input"])
        return one, batch

    (one, batch), records, prom = through_gateway(go)
    assert len(one.data) == 1 and [d.index for d in batch.data] == [0, 1]
    assert one.data[0].embedding != batch.data[0].embedding  # each input its own vector
    single, batched = records
    measured(single, "embeddings", 0)
    measured(batched, "embeddings", 0)
    assert batched.prompt_tokens == batch.usage.prompt_tokens == 5
    assert single.first_token_ns == single.token_ns[-1]  # the whole answer at once: TTFT is E2E
    assert series(prom, "tokenpace_gateway_requests_total", "embeddings") == 2


def test_anthropic_messages_stream_and_create() -> None:
    async def go(t: Through) -> tuple[Any, Any]:
        async with t.anthropic.messages.stream(
            model="m", max_tokens=6, messages=CHAT, extra_body=THINK
        ) as stream:
            streamed = await stream.get_final_message()
        whole = await t.anthropic.messages.create(model="m", max_tokens=3, messages=CHAT)
        return streamed, whole

    (streamed, whole), records, prom = through_gateway(go)
    assert [b.type for b in streamed.content] == ["thinking", "text"]
    streamed_rec, whole_rec = records
    measured(streamed_rec, "anthropic", 6)
    reasoned_first(streamed_rec)
    assert streamed_rec.finish_reason == "max_tokens"
    measured(whole_rec, "anthropic", whole.usage.output_tokens)
    assert series(prom, "tokenpace_gateway_requests_total", "anthropic") == 2
    # under load one read can hold every token (no gap to time): then no TPOT, as offline
    timed = 1 if tpot_ns(streamed_rec) is not None else 0
    assert series(prom, "gen_ai_server_time_per_output_token_seconds_count", "anthropic") == timed
