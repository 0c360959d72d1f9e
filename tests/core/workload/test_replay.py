"""Request records as a trace: lengths, prefixes and arrivals kept; what a record cannot say is filled
in and counted."""

import pytest

from tokenpace.core.workload.replay import (
    only_api,
    parse_window,
    trace_from_records,
    window,
    without_template,
)
from tokenpace.core.workload.trace import TraceRow


def _rec(i: int, **kw) -> dict:
    base = {"request_id": f"r{i}", "status": "ok", "sent_ns": 1_000_000_000 * i, "labels": {}}
    return base | kw


def test_records_keep_their_arrivals_lengths_and_prefix_blocks_in_time_order():
    recs = [
        _rec(2, prompt_tokens=300, output_tokens=20, prefix_hashes=[7, 8], prompt_chars=1200),
        _rec(1, prompt_tokens=100, output_tokens=10, prefix_hashes=[7], prompt_chars=400),
    ]
    trace = trace_from_records(recs)
    assert [r.timestamp_s for r in trace.rows] == [1.0, 2.0]
    assert [(r.input_tokens, r.output_tokens) for r in trace.rows] == [(100, 10), (300, 20)]
    assert trace.rows[1].hash_ids == (7, 8)
    assert trace.description["tokens_per_char"] == pytest.approx(0.25)
    assert trace.block_tokens == 512  # 2048 characters at 0.25 tokens each


def test_missing_counts_are_filled_and_counted():
    recs = [
        _rec(0, prompt_tokens=100, prompt_chars=200, output_tokens=30),
        _rec(1, prompt_tokens=100, prompt_chars=200, output_tokens=50),
        _rec(2, prompt_chars=1000, status="http_error", output_tokens=0, output_tokens_requested=64),
        _rec(3, prompt_chars=1000, status="timeout", output_tokens=0),
    ]
    rows = trace_from_records(recs)
    assert rows.rows[2].input_tokens == 500  # 1000 characters at the trace's 0.5 tokens each
    assert rows.rows[2].output_tokens == 64  # what the client asked for
    assert rows.rows[3].output_tokens == 40  # the median of the answered ones
    assert rows.description["filled"] == {
        "input_from_chars": 2,
        "input_with_template": 2,  # the server's count, its template unknown (two alike records)
        "output_from_request": 1,
        "output_from_median": 1,
    }


def test_warm_up_requests_of_a_bench_run_are_left_out_and_prompts_kept_when_stored():
    recs = [_rec(0, warmup=True, prompt_tokens=5, output_tokens=5), _rec(1, prompt_tokens_requested=9,
            output_tokens=3, prompt_text="the real prompt", prefix_id=2)]  # fmt: skip
    trace = trace_from_records(recs)
    assert len(trace.rows) == 1
    assert trace.rows[0].prompt == "the real prompt" and trace.rows[0].prefix_id == "2"
    with pytest.raises(ValueError, match="no request record"):
        trace_from_records([_rec(0, warmup=True)])


def test_a_window_and_an_api_cut_the_rows():
    rows = [TraceRow(float(t), 10, 10, api=api) for t, api in ((0, "chat"), (5, "responses"), (9, None))]
    assert [r.timestamp_s for r in window(rows, 4, None)] == [5.0, 9.0]
    assert [r.timestamp_s for r in window(rows, 0, 5)] == [0.0]
    kept, left = only_api(rows, "chat")
    assert [r.timestamp_s for r in kept] == [0.0, 9.0] and left == {"responses": 1}


def test_a_window_is_read_strictly():
    seconds = float
    assert parse_window("10:70", seconds) == (10.0, 70.0)
    assert parse_window(":30", seconds) == (0.0, 30.0)
    assert parse_window("5:", seconds) == (5.0, None)
    for bad in ("30", "70:10", "10:10"):
        with pytest.raises(ValueError, match="trace-window"):
            parse_window(bad, seconds)


def test_the_captured_servers_template_tokens_are_not_sent_twice():
    # a gateway's records: the server counted each prompt's words plus 7 template tokens, and the
    # prompt held 5 characters a word; the replay sends the words (its server adds its own 7)
    words = [40, 90, 150, 260, 400, 520, 700, 900, 1200, 60]
    recs = [_rec(i, prompt_tokens=w + 7, prompt_chars=5 * w, output_tokens=8) for i, w in enumerate(words)]
    trace = trace_from_records(recs)
    assert [r.input_tokens for r in trace.rows] == words
    assert trace.description["template_tokens"] == {"tokens": 7, "from": "fit"}
    assert trace.description["tokens_per_char"] == pytest.approx(0.2)
    # a bench run's records say what was asked: that is the length, and the template is the rest
    bench = [
        _rec(i, prompt_tokens=w + 7, prompt_tokens_requested=w, output_tokens=8) for i, w in enumerate(words)
    ]
    trace = trace_from_records(bench)
    assert [r.input_tokens for r in trace.rows] == words
    assert trace.description["template_tokens"] == {"tokens": 7, "from": "asked"}
    # too few records, or lengths all alike: the template cannot be told apart, and that is said
    few = trace_from_records(recs[:3])
    assert few.description["template_tokens"] == {"tokens": 0, "from": "unknown"}
    assert [r.input_tokens for r in few.rows] == [w + 7 for w in words[:3]]


def test_prompts_whose_template_cannot_be_told_are_marked_and_a_stated_template_comes_off():
    """Issue 40: where the records cannot say the captured template, the rows sent the server's
    count unmarked (7 tokens longer on the sim); now each is marked and counted, and a template the
    user states is taken off those rows only."""
    words = [40, 90, 150]
    recs = [_rec(i, prompt_tokens=w + 7, prompt_chars=5 * w, output_tokens=8) for i, w in enumerate(words)]
    asked = _rec(3, prompt_tokens=57, prompt_tokens_requested=50, output_tokens=8)  # a bench record: exact
    trace = trace_from_records(recs)
    assert [r.template_in_input for r in trace.rows] == [True] * 3
    assert trace.description["filled"]["input_with_template"] == 3
    fixed = without_template(trace_from_records([*recs[:2], asked]).rows, 7)
    assert [(r.input_tokens, r.template_in_input) for r in fixed] == [(40, False), (90, False), (50, False)]
    with pytest.raises(ValueError, match="0 to 64"):
        without_template(trace.rows, 65)
    fitted = trace_from_records([_rec(i, prompt_tokens=w + 7, prompt_chars=5 * w) for i, w in
                                 enumerate([40, 90, 150, 260, 400, 520, 700, 900, 1200, 60])])  # fmt: skip
    assert not any(r.template_in_input for r in fitted.rows)
    assert "input_with_template" not in fitted.description.get("filled", {})
