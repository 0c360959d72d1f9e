from tokenpace.core.record import RequestRecord
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.dialects.base import ANSWER, ERROR, REASONING, Sampling


def chat_chunk(delta, finish=None):
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_chat_body_asks_for_usage_and_enforces_length_when_asked():
    d = get_dialect("chat")
    body = d.body("hi there", 64, "m", Sampling(0.5, 0.9, ignore_eos=True), stream=True)
    assert body["messages"] == [{"role": "user", "content": "hi there"}]
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 64 and body["min_tokens"] == 64 and body["ignore_eos"] is True
    assert body["temperature"] == 0.5 and body["top_p"] == 0.9
    plain = d.body("x", 8, "m", Sampling(), stream=False)
    assert "stream_options" not in plain and "ignore_eos" not in plain


def test_role_only_empty_and_null_chunks_are_not_tokens():
    d, r = get_dialect("chat"), RequestRecord("r")
    assert d.classify(chat_chunk({"role": "assistant", "content": ""}), r) == 0
    assert d.classify(chat_chunk({"content": None}), r) == 0
    assert d.classify(chat_chunk({}), r) == 0
    assert d.classify({"choices": []}, r) == 0


def test_every_output_channel_counts():
    d, r = get_dialect("chat"), RequestRecord("r")
    assert d.classify(chat_chunk({"content": "a"}), r) == ANSWER
    assert d.classify(chat_chunk({"reasoning_content": "hm"}), r) == REASONING
    assert d.classify(chat_chunk({"reasoning": "hm"}), r) == REASONING
    tool = {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}
    assert d.classify(chat_chunk(tool), r) == ANSWER


def test_usage_finish_reason_and_error_events():
    d, r = get_dialect("chat"), RequestRecord("r")
    d.classify(chat_chunk({"content": "a"}, "length"), r)
    d.classify({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}, r)
    assert (r.finish_reason, r.prompt_tokens, r.output_tokens_server) == ("length", 7, 3)
    assert d.classify({"error": {"message": "boom"}}, r) == ERROR


def test_completions_dialect():
    d, r = get_dialect("completions"), RequestRecord("r")
    assert d.body("p", 4, "m", Sampling(), True)["prompt"] == "p"
    assert d.classify({"choices": [{"text": ""}]}, r) == 0
    assert d.classify({"choices": [{"text": " w", "finish_reason": "stop"}]}, r) == ANSWER
    assert r.finish_reason == "stop"
