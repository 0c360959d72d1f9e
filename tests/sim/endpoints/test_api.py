"""The OpenAI surface of the real-time sim: exact streaming shapes, usage, errors, side endpoints."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tokenpace.sim import SimServer, get_profile
from tokenpace.sim.endpoints.api import DEFAULT_MAX_TOKENS, ApiError, parse_generation
from tokenpace.sim.endpoints.tokens import MESSAGE_OVERHEAD, REPLY_OVERHEAD


def serve(coro_fn, **kw):
    async def main():
        async with SimServer(**kw) as srv, aiohttp.ClientSession() as session:
            return await coro_fn(srv, session)

    return asyncio.run(main())


async def sse(session, url, body, headers=None):
    """(status, headers, [parsed data payloads], saw_done)."""
    events, done = [], False
    async with session.post(url, json=body, headers=headers or {}) as r:
        async for line in r.content:
            line = line.decode().rstrip("\n")
            if not line.startswith("data: "):
                assert line == "", line
                continue
            payload = line[6:]
            if payload == "[DONE]":
                done = True
            else:
                events.append(json.loads(payload))
        return r.status, r.headers, events, done


def test_chat_stream_shape_usage_and_done():
    async def go(srv, s):
        body = {
            "model": "anything",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "say five words"},
            ],
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return await sse(s, srv.url + "/chat/completions", body, {"x-request-id": "req-42"})

    status, headers, ev, done = serve(go)
    assert status == 200 and done
    assert headers["x-request-id"] == "req-42"
    assert headers["content-type"] == "text/event-stream"
    assert {e["object"] for e in ev} == {"chat.completion.chunk"} and len({e["id"] for e in ev}) == 1
    assert all(e["model"] == "anything" and isinstance(e["created"], int) for e in ev)
    assert ev[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    tokens = ev[1:6]
    assert [e["choices"][0]["delta"] for e in tokens] == [
        {"content": w} for w in [" lorem", " ipsum", " dolor", " sit", " amet"]
    ]
    assert all(e["choices"][0]["finish_reason"] is None for e in tokens)
    assert ev[6]["choices"][0]["finish_reason"] == "length" and ev[6]["choices"][0]["delta"] == {}
    prompt = 2 * MESSAGE_OVERHEAD + REPLY_OVERHEAD + 2 + 3
    assert ev[7]["choices"] == [] and ev[7]["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": 5,
        "total_tokens": prompt + 5,
    }
    assert len(ev) == 8


def test_completion_stream_without_usage_and_non_streaming_bodies():
    async def go(srv, s):
        st = await sse(
            s, srv.url + "/completions", {"prompt": "one two three", "max_tokens": 3, "stream": True}
        )
        async with s.post(srv.url + "/completions", json={"prompt": "one two three", "max_tokens": 3}) as r:
            plain = (r.status, await r.json())
        async with s.post(
            srv.url + "/chat/completions",
            json={
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "max_completion_tokens": 2,
            },
        ) as r:
            chat = (r.status, await r.json())
        return st, plain, chat

    (status, _, ev, done), plain, chat = serve(go)
    assert status == 200 and done
    assert [e["choices"][0]["text"] for e in ev] == [" lorem", " ipsum", " dolor", ""]
    assert ev[-1]["choices"][0]["finish_reason"] == "length" and all("usage" not in e for e in ev)
    assert all(e["object"] == "text_completion" for e in ev)
    assert plain[0] == 200 and plain[1]["choices"][0]["text"] == " lorem ipsum dolor"
    assert plain[1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert chat[0] == 200 and chat[1]["object"] == "chat.completion"
    assert chat[1]["choices"][0]["message"] == {"role": "assistant", "content": " lorem ipsum"}
    assert chat[1]["usage"]["prompt_tokens"] == MESSAGE_OVERHEAD + REPLY_OVERHEAD + 1


def test_eos_min_tokens_and_ignore_eos():
    prof = get_profile().with_overrides(engine={"eos_prob": 0.3})

    async def go(srv, s):
        out = []
        for body in ({"ignore_eos": True}, {"min_tokens": 6}, {}):
            async with s.post(srv.url + "/completions", json={"prompt": "x", "max_tokens": 40, **body}) as r:
                out.append((await r.json())["choices"][0]["finish_reason"])
                out.append((await r.json())["usage"]["completion_tokens"])
        return out

    res = serve(go, profile=prof)
    assert res[0:2] == ["length", 40]
    assert res[2] == "stop" and 6 <= res[3] < 40


@pytest.mark.parametrize(
    "path,body",
    [
        ("/chat/completions", b"{not json"),
        ("/chat/completions", b"[1, 2]"),
        ("/chat/completions", b'{"model": "m"}'),
        ("/chat/completions", b'{"messages": "hi"}'),
        ("/chat/completions", b'{"messages": [{"content": "no role"}]}'),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}'),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}'),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}'),
        ("/completions", b'{"max_tokens": 3}'),
        ("/completions", b'{"prompt": {"a": 1}}'),
        ("/completions", b'{"prompt": "x", "max_tokens": 99999999}'),
        ("/completions", b'{"prompt": "x", "max_tokens": 2, "min_tokens": 5}'),
    ],
)
def test_malformed_requests_get_400_with_openai_error_body(path, body):
    async def go(srv, s):
        async with s.post(srv.url + path, data=body) as r:
            first = (r.status, await r.json())
        async with s.post(srv.url + "/completions", json={"prompt": "still alive", "max_tokens": 1}) as r:
            return first, r.status

    (status, err), after = serve(go)
    assert status == 400
    assert set(err) == {"error"} and set(err["error"]) == {"message", "type", "param", "code"}
    assert err["error"]["type"] == "invalid_request_error" and err["error"]["message"]
    assert after == 200


def test_default_max_tokens_is_256_within_context():
    g = parse_generation(b'{"prompt": "a b"}', "completion", "m", 1000)
    assert g.max_tokens == DEFAULT_MAX_TOKENS
    assert parse_generation(b'{"prompt": "a b"}', "completion", "m", 100).max_tokens == 98
    with pytest.raises(ApiError):
        parse_generation(b'{"prompt": "a b c"}', "completion", "m", 3)


def test_models_tokenize_health_metrics_and_unknown_routes():
    async def go(srv, s):
        base = srv.url[: -len("/v1")]
        out = {}
        async with s.get(srv.url + "/models") as r:
            out["models"] = await r.json()
        async with s.post(base + "/tokenize", json={"model": "m", "prompt": "a b c a"}) as r:
            out["tok"] = await r.json()
        async with s.post(base + "/tokenize", json={"messages": [{"role": "user", "content": "a b"}]}) as r:
            out["tokchat"] = await r.json()
        async with s.get(base + "/health") as r:
            out["health"] = r.status
        await s.post(srv.url + "/completions", json={"prompt": "a " * 40, "max_tokens": 3})
        async with s.get(base + "/metrics") as r:
            out["metrics"] = await r.text()
        async with s.get(srv.url + "/nothing") as r:
            out["404"] = (r.status, await r.json())
        async with s.get(srv.url + "/completions") as r:
            out["405"] = r.status
        return out

    o = serve(go)
    assert o["models"]["data"][0]["id"] == get_profile().served_model_name
    assert o["tok"]["count"] == 4 and len(o["tok"]["tokens"]) == 4
    assert o["tok"]["tokens"][0] == o["tok"]["tokens"][3] and o["tok"]["max_model_len"] > 0
    assert o["tokchat"]["count"] == MESSAGE_OVERHEAD + REPLY_OVERHEAD + 2
    assert o["health"] == 200 and o["404"][0] == 404 and "error" in o["404"][1] and o["405"] == 405
    m = o["metrics"]
    label = f'model_name="{get_profile().served_model_name}"'
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    ):
        assert f"{name}{{{label}}}" in m, name
    for h in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
    ):
        assert f"{h}_count{{{label}}} 1" in m or f"{h}_count{{{label}}} 2" in m, h
    assert f"vllm:generation_tokens_total{{{label}}} 3.0" in m
    assert f"vllm:prompt_tokens_total{{{label}}} 40.0" in m


def test_expect_100_continue_and_pipelined_keep_alive_requests():
    async def go(srv, _session):
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b'{"prompt": "a b", "max_tokens": 1}'
        head = (
            f"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
            "expect: 100-continue\r\n\r\n"
        ).encode()
        writer.write(head)
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.5)
        writer.write(body)
        plain = (
            f"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body
        )
        writer.write(plain + plain)  # two more, pipelined on the same connection
        data = b""
        while data.count(b'"completion_tokens":1') < 3:
            data += await asyncio.wait_for(reader.read(65536), 2)
        writer.close()
        return interim, data

    interim, data = serve(go)
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    assert data.count(b"HTTP/1.1 200 OK") == 3
