"""Anthropic Messages, OpenAI Responses and embeddings: bodies, event meanings, errors in the stream."""

import asyncio

import orjson

from tokenpace.client.exchange import Measure
from tokenpace.core.record import RequestRecord, Status
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import ANSWER, ERROR, REASONING, Sampling


def delta(kind, **fields):
    return {"type": "content_block_delta", "index": 0, "delta": {"type": kind, **fields}}


def test_anthropic_body_moves_system_messages_and_sends_its_version_header():
    d = get_dialect("anthropic")
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    body = d.body("", 32, "m", Sampling(top_p=0.9), stream=True, messages=chat)
    assert body["system"] == "be brief" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 32 and body["stream"] is True and body["top_p"] == 0.9
    assert ("anthropic-version", "2023-06-01") in d.headers
    assert d.path == "/messages"


def test_anthropic_events():
    d, r = get_dialect("anthropic"), RequestRecord("r")
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 11, "output_tokens": 1}}}
    assert d.classify(start, r) == 0 and r.prompt_tokens == 11 and r.output_tokens_server is None
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "f"}}
    assert d.classify(block, r) == 0  # a block's start carries no token
    assert d.classify(delta("thinking_delta", thinking="hm"), r) == REASONING
    assert d.classify(delta("text_delta", text="a"), r) == ANSWER
    assert d.classify(delta("text_delta", text=""), r) == 0
    assert d.classify(delta("input_json_delta", partial_json='{"a'), r) == ANSWER
    assert d.classify(delta("signature_delta", signature="x"), r) == 0
    assert d.classify({"type": "ping"}, r) == 0
    end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}}
    assert d.classify(end, r) == 0 and (r.finish_reason, r.output_tokens_server) == ("max_tokens", 9)
    assert (
        d.classify({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, r)
        == ERROR
    )


def test_anthropic_whole_message():
    d, r = get_dialect("anthropic"), RequestRecord("r")
    msg = {
        "type": "message",
        "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "yes"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 4},
    }
    assert d.read_full(msg, r) == ANSWER | REASONING
    assert (r.prompt_tokens, r.output_tokens_server, r.finish_reason) == (5, 4, "end_turn")


def test_responses_body_and_events():
    d, r = get_dialect("responses"), RequestRecord("r")
    body = d.body("hi", 16, "m", Sampling(), stream=True)
    assert body["input"] == "hi" and body["max_output_tokens"] == 16 and d.path == "/responses"
    assert d.classify({"type": "response.created", "response": {}}, r) == 0
    assert d.classify({"type": "response.reasoning_text.delta", "delta": "hm"}, r) == REASONING
    assert d.classify({"type": "response.reasoning_summary_text.delta", "delta": "hm"}, r) == REASONING
    assert d.classify({"type": "response.output_text.delta", "delta": "a"}, r) == ANSWER
    assert d.classify({"type": "response.function_call_arguments.delta", "delta": "{"}, r) == ANSWER
    assert d.classify({"type": "response.output_text.delta", "delta": ""}, r) == 0
    done = {
        "type": "response.incomplete",
        "response": {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 7, "output_tokens": 16},
        },
    }
    assert d.classify(done, r) == 0
    assert (r.prompt_tokens, r.output_tokens_server, r.finish_reason) == (7, 16, "max_output_tokens")
    assert d.classify({"type": "error", "code": "server_error", "message": "boom"}, r) == ERROR
    assert d.classify({"type": "response.failed", "response": {"error": {"message": "x"}}}, r) == ERROR


def test_embeddings_body_and_response():
    d, r = get_dialect("embeddings"), RequestRecord("r")
    assert d.body("some text", 8, "m", Sampling(), stream=True) == {
        "model": "m",
        "input": "some text",
        "encoding_format": "float",
    }
    response = {"data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 2, "total_tokens": 2}}
    assert d.read_full(response, r) == ANSWER and r.prompt_tokens == 2 and r.output_tokens == 0


def feed(api, events, status=200, content_type=b"text/event-stream"):
    """A record from an exchange that received ``events`` (SSE, with their event: lines)."""

    async def go():
        rec = RequestRecord("r")
        ex = Measure(rec, get_dialect(api), True, asyncio.get_running_loop()).exchange
        ex.response_header(b"Content-Type", b"content-type", content_type)
        ex.response_head(status, 1)
        for i, e in enumerate(events, start=2):
            ex.response_body(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n", i)
        ex.response_end(100)
        return rec

    return asyncio.run(go())


def test_an_anthropic_error_event_interrupts_the_stream_with_its_message():
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    rec = feed("anthropic", [start, delta("text_delta", text="a"), err])
    assert rec.status is Status.STREAM_INTERRUPTED and rec.error == "server error in stream: Overloaded"
    assert rec.token_ns == [3]  # what arrived before the error is kept


def test_a_responses_stream_ends_with_its_completed_event_without_done():
    text = {"type": "response.output_text.delta", "delta": "a"}
    end = {"type": "response.completed", "response": {"status": "completed", "usage": {"output_tokens": 2}}}
    rec = feed("responses", [text, text, end])
    assert rec.status is Status.OK and rec.output_tokens == 2 and rec.finish_reason == "completed"
    err = feed("responses", [text, {"type": "error", "message": "rate limited"}])
    assert err.status is Status.STREAM_INTERRUPTED and err.error.endswith("rate limited")
    cut = feed("responses", [text])
    assert cut.status is Status.STREAM_INTERRUPTED  # neither completed nor [DONE]


def test_realtime_body_and_events():
    d, r = get_dialect("realtime"), RequestRecord("r")
    body = d.body("hi", 8, "m", Sampling(), stream=True)
    assert body["type"] == "response.create" and body["response"]["conversation"] == "none"
    assert body["response"]["input"][0]["content"] == [{"type": "input_text", "text": "hi"}]
    assert d.classify({"type": "response.output_text.delta", "delta": "a"}, r) == ANSWER
    assert d.classify({"type": "response.text.delta", "delta": "a"}, r) == ANSWER
    assert d.classify({"type": "response.output_text.delta", "delta": ""}, r) == 0
    done = {
        "type": "response.done",
        "response": {"status": "completed", "usage": {"input_tokens": 3, "output_tokens": 5}},
    }
    assert d.classify(done, r) == 0 and (r.prompt_tokens, r.output_tokens_server, r.finish_reason) == (
        3,
        5,
        "completed",
    )
    assert d.classify({"type": "error", "error": {"message": "busy"}}, r) == ERROR
