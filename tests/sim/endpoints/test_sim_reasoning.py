"""The sim streams a reasoning phase, tool-call deltas and multi-token chunks when asked."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tokenpace.sim import SimServer, get_profile


def serve(coro_fn, **kw):
    async def main():
        async with SimServer(**kw) as srv, aiohttp.ClientSession() as session:
            return await coro_fn(srv, session)

    return asyncio.run(main())


async def sse(session, url, body):
    """(status, headers, [parsed data payloads], saw_done)."""
    events, done = [], False
    async with session.post(url, json=body) as r:
        async for line in r.content:
            line = line.decode().rstrip("\n")
            if line.startswith("data: "):
                if line == "data: [DONE]":
                    done = True
                else:
                    events.append(json.loads(line[6:]))
        return r.status, r.headers, events, done


CHAT = [{"role": "user", "content": "think then answer"}]


def chat(srv, s, **extra):
    body = {"messages": CHAT, "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}}
    return sse(s, srv.url + "/chat/completions", {**body, **extra})


def deltas(events):
    return [
        e["choices"][0]["delta"] for e in events if e["choices"] and e["choices"][0]["finish_reason"] is None
    ]


def test_reasoning_tokens_stream_before_the_answer_and_count_in_usage():
    async def go(srv, s):
        return await chat(srv, s, reasoning_tokens=4)

    status, _, ev, done = serve(go)
    assert status == 200 and done
    d = deltas(ev)[1:]  # after the role chunk
    assert [list(x) for x in d] == [["reasoning_content"]] * 4 + [["content"]] * 2
    assert "".join(x["reasoning_content"] for x in d[:4]) == " lorem ipsum dolor sit"
    assert ev[-1]["usage"]["completion_tokens"] == 6
    assert ev[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 4}


def test_profile_default_reasoning_and_request_override():
    profile = get_profile().with_overrides(engine={"reasoning_tokens": 2})

    async def go(srv, s):
        return await chat(srv, s), await chat(srv, s, reasoning_tokens=0)

    (_, _, by_profile, _), (_, _, overridden, _) = serve(go, profile=profile)
    assert sum("reasoning_content" in x for x in deltas(by_profile)) == 2
    assert not any("reasoning_content" in x for x in deltas(overridden))


def test_tools_make_the_answer_a_streamed_tool_call_with_valid_arguments():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]

    async def go(srv, s):
        return await chat(srv, s, tools=tools, reasoning_tokens=1, max_tokens=4)

    _, _, ev, done = serve(go)
    assert done
    d = deltas(ev)[1:]
    assert "reasoning_content" in d[0]
    calls = [x["tool_calls"][0] for x in d[1:]]
    assert len(calls) == 3 and calls[0]["function"]["name"] == "lookup" and calls[0]["id"]
    args = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(args) == {"text": " ipsum dolor sit"}


@pytest.mark.parametrize("per_chunk, sizes", [(3, [3, 3, 1]), (1, [1] * 7)])
def test_multi_token_chunks_with_usage_on_every_chunk(per_chunk, sizes):
    async def go(srv, s):
        opts = {"include_usage": True, "continuous_usage_stats": True}
        return await chat(srv, s, max_tokens=7, tokens_per_chunk=per_chunk, stream_options=opts)

    _, _, ev, _ = serve(go)
    tokens = [e for e in ev if e["choices"] and e["choices"][0]["delta"].get("content")]
    assert [len(e["choices"][0]["delta"]["content"].split()) for e in tokens] == sizes
    so_far = [e["usage"]["completion_tokens"] for e in tokens]
    assert so_far == [sum(sizes[: i + 1]) for i in range(len(sizes))]


def test_a_chunk_never_mixes_reasoning_and_answer():
    async def go(srv, s):
        return await chat(srv, s, max_tokens=8, reasoning_tokens=3, tokens_per_chunk=2)

    _, _, ev, _ = serve(go)
    d = deltas(ev)[1:]
    kinds = [(next(iter(x)), len(next(iter(x.values())).split())) for x in d]
    assert kinds == [
        ("reasoning_content", 2),
        ("reasoning_content", 1),
        ("content", 2),
        ("content", 2),
        ("content", 1),
    ]


def test_non_streamed_reasoning_and_tool_call():
    tools = [{"type": "function", "function": {"name": "f"}}]

    async def go(srv, s):
        body = {"messages": CHAT, "max_tokens": 5, "reasoning_tokens": 2, "tools": tools}
        async with s.post(srv.url + "/chat/completions", json=body) as r:
            return await r.json()

    out = serve(go)
    msg = out["choices"][0]["message"]
    assert msg["reasoning_content"] == " lorem ipsum" and msg["content"] is None
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"text": " dolor sit amet"}
    assert out["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
