"""The official OpenAI and Anthropic Python SDKs, as real clients of the sim, parse what it sends."""

from __future__ import annotations

import asyncio
import json

import pytest

from tokenpace.sim import SimServer, get_profile

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

CHAT = [{"role": "user", "content": "think then answer"}]


class Clients:
    def __init__(self, srv):
        self.openai = openai.AsyncOpenAI(base_url=srv.url, api_key="sk-test", max_retries=0)
        base = srv.url.removesuffix("/v1")
        self.anthropic = anthropic.AsyncAnthropic(base_url=base, api_key="sk-test", max_retries=0)


def with_sim(fn, **engine):
    """Runs ``fn(clients)`` against a fresh sim; the SDK clients close inside the loop."""

    async def main():
        async with SimServer(get_profile().with_overrides(engine=engine)) as srv:
            c = Clients(srv)
            async with c.openai, c.anthropic:
                return await fn(c)

    return asyncio.run(main())


def oai(c):
    return c.openai


def claude(c):
    return c.anthropic


def test_openai_chat_stream_with_reasoning_and_a_tool_call():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]

    async def go(c):
        stream = await oai(c).chat.completions.create(
            model="m",
            messages=CHAT,
            max_tokens=5,
            stream=True,
            tools=tools,
            extra_body={"reasoning_tokens": 2},
        )
        return [c async for c in stream]

    chunks = with_sim(go)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
    args = "".join(t.function.arguments or "" for d in deltas for t in d.tool_calls or ())
    assert reasoning == " lorem ipsum"
    assert json.loads(args) == {"text": " dolor sit amet"}
    assert next(t.function.name for d in deltas for t in d.tool_calls or ()) == "lookup"
    assert chunks[-1].choices[0].finish_reason == "length"


def test_anthropic_stream_accumulates_thinking_text_and_usage():
    async def go(c):
        async with claude(c).messages.stream(
            model="m", max_tokens=6, messages=CHAT, extra_body={"reasoning_tokens": 2}
        ) as stream:
            kinds = [e.type async for e in stream]
            return kinds, await stream.get_final_message()

    kinds, message = with_sim(go)
    assert kinds[0] == "message_start" and "content_block_delta" in kinds and kinds[-1] == "message_stop"
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert (
        message.content[0].thinking == " lorem ipsum"
        and message.content[1].text == " dolor sit amet consectetur"
    )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 6


def test_anthropic_tool_use_stream_and_whole_message():
    tools = [{"name": "lookup", "input_schema": {"type": "object"}}]

    async def go(c):
        client = claude(c)
        async with client.messages.stream(model="m", max_tokens=3, messages=CHAT, tools=tools) as stream:
            streamed = await stream.get_final_message()
        whole = await client.messages.create(model="m", max_tokens=3, messages=CHAT, tools=tools)
        return streamed, whole

    streamed, whole = with_sim(go)
    for message in (streamed, whole):
        block = message.content[0]
        assert block.type == "tool_use" and block.name == "lookup"
        assert block.input == {"text": " lorem ipsum dolor"}


def test_anthropic_errors_have_anthropic_shape():
    async def go(c):
        with pytest.raises(anthropic.BadRequestError) as info:
            await claude(c).messages.create(model="m", max_tokens=0, messages=CHAT)
        return info.value

    err = with_sim(go)
    assert err.body["type"] == "error" and "max_tokens" in err.body["error"]["message"]


def test_openai_responses_stream_events_and_final_response():
    async def go(c):
        client = oai(c)
        stream = await client.responses.create(
            model="m", input="hi", max_output_tokens=5, stream=True, extra_body={"reasoning_tokens": 2}
        )
        events = [e async for e in stream]
        whole = await client.responses.create(model="m", input="hi", max_output_tokens=3)
        return events, whole

    events, whole = with_sim(go)
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert (reasoning, text) == (" lorem ipsum", " dolor sit amet")
    assert types[-1] == "response.incomplete" and events[-1].response.usage.output_tokens == 5
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    assert whole.output_text == " lorem ipsum dolor" and whole.usage.output_tokens == 3


def test_openai_responses_stream_helper_on_a_completed_response():
    async def go(c):
        async with oai(c).responses.stream(model="m", input="hi", max_output_tokens=4) as helper:
            return await helper.get_final_response()

    final = with_sim(go, eos_prob=1.0)  # stops after one token: response.completed, not .incomplete
    assert final.status == "completed" and final.output_text == " lorem"


def test_openai_responses_function_call_arguments():
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]

    async def go(c):
        stream = await oai(c).responses.create(
            model="m", input="hi", max_output_tokens=2, stream=True, tools=tools
        )
        return [e async for e in stream]

    events = with_sim(go)
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"text": " lorem ipsum"}
    done = [e for e in events if e.type == "response.output_item.done"]
    assert done[-1].item.type == "function_call" and done[-1].item.name == "lookup"


def test_openai_embeddings():
    async def go(c):
        return await oai(c).embeddings.create(model="m", input="hello embedded world")

    out = with_sim(go)
    vector = out.data[0].embedding
    assert len(vector) == 16 and abs(sum(x * x for x in vector) - 1.0) < 1e-9
    assert out.usage.prompt_tokens == 3


def test_openai_responses_stream_helper_on_the_default_profile():
    """No limit from the client: the model stops by itself, so the stream ends response.completed."""

    async def go(c):
        async with oai(c).responses.stream(model="m", input="hi") as helper:
            kinds = [e.type async for e in helper]
            return kinds, await helper.get_final_response()

    kinds, final = with_sim(go)
    assert kinds[-1] == "response.completed"
    assert final.status == "completed" and final.incomplete_details is None
    assert final.usage.output_tokens > 0 and final.output_text


def test_openai_chat_stream_helper_and_the_default_stop():
    async def go(c):
        async with oai(c).chat.completions.stream(model="m", messages=CHAT) as helper:
            texts = [e.delta async for e in helper if e.type == "content.delta"]
            final = await helper.get_final_completion()
        limited = await oai(c).chat.completions.create(model="m", messages=CHAT, max_tokens=2)
        return texts, final, limited

    texts, final, limited = with_sim(go)
    assert "".join(texts) == final.choices[0].message.content
    assert final.choices[0].finish_reason == "stop"  # the model stopped: no limit of the client's
    assert limited.choices[0].finish_reason == "length"  # the client's own limit


def test_anthropic_text_stream_helper():
    async def go(c):
        async with claude(c).messages.stream(model="m", max_tokens=4, messages=CHAT) as stream:
            pieces = [t async for t in stream.text_stream]
            return pieces, await stream.get_final_text()

    pieces, text = with_sim(go)
    assert len(pieces) == 4 and "".join(pieces) == text == " lorem ipsum dolor sit"


def test_openai_embeddings_batch():
    async def go(c):
        batch = await oai(c).embeddings.create(model="m", input=["hello", "embedded world"])
        ids = await oai(c).embeddings.create(model="m", input=[[1, 2, 3], [4]])
        return batch, ids

    batch, ids = with_sim(go)
    assert [d.index for d in batch.data] == [0, 1] and batch.usage.prompt_tokens == 3
    assert batch.data[0].embedding != batch.data[1].embedding
    assert len(ids.data) == 2 and ids.usage.prompt_tokens == 4
