"""Workload file readers: formats, column mappings, and errors that name the file and the line."""

import json

import pytest

from tokenpace.adapters.datasets import DatasetError, load_dataset, read_length_pairs, read_trace


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_prompts_jsonl(tmp_path):
    f = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "hello world", "output_len": 12}, {"prompt": "bye"}])
    entries, info = load_dataset(f)
    assert info["format"] == "prompts"
    assert [(e.turns, e.output_len) for e in entries] == [(("hello world",), 12), (("bye",), None)]


def test_sharegpt_json_array_keeps_turns_and_replies_and_skips_botless(tmp_path):
    data = [
        {"id": "a", "conversations": [
            {"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"},
            {"from": "human", "value": "q2"}, {"from": "gpt", "value": "a2 a2"},
        ]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "orphan"}]},
    ]  # fmt: skip
    f = tmp_path / "sg.json"
    f.write_text(json.dumps(data))
    entries, info = load_dataset(f)
    assert info == {"dataset": str(f), "format": "sharegpt", "skipped": 1}
    assert entries[0].turns == ("q1", "q2") and entries[0].replies == ("a1", "a2 a2")


def test_openai_logs_plain_and_batch_nested(tmp_path):
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    f = write_jsonl(
        tmp_path / "o.jsonl",
        [
            {"messages": msgs, "max_tokens": 30},
            {"custom_id": "x", "body": {"messages": msgs, "max_completion_tokens": 7}},
        ],
    )
    entries, info = load_dataset(f)
    assert info["format"] == "openai"
    assert entries[0].messages[1] == {"role": "user", "content": "hi"}
    assert [e.output_len for e in entries] == [30, 7]


@pytest.mark.parametrize(
    "lines, fmt, needle",
    [
        (['{"prompt": "a"}', "{not json"], "auto", "line 2: not valid JSON"),
        (['{"prompt": "a"}', '{"text": "b"}'], "auto", "line 2: no 'prompt' field"),
        (['{"prompt": "a", "output_len": -3}'], "auto", "line 1: output_len must be a whole number >= 1"),
        (['{"foo": 1}'], "auto", "line 1: cannot tell the format"),
        (['{"prompt": "a"}'], "sharegpt", "line 1: no 'conversations' list"),
        (['{"messages": [{"content": "x"}]}'], "auto", "line 1: messages[0] needs a 'role'"),
        (["[1, 2]"], "auto", "item 1 of the JSON array is not an object"),
    ],
)
def test_bad_dataset_lines_name_file_and_line(tmp_path, lines, fmt, needle):
    f = write_jsonl(tmp_path / "bad.jsonl", lines)
    with pytest.raises(DatasetError) as err:
        load_dataset(f, fmt)
    assert str(f) in str(err.value) and needle in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(DatasetError, match="empty"):
        read_length_pairs(tmp_path / "empty.jsonl")


def test_length_pairs_from_usage_and_flat_fields(tmp_path):
    f = write_jsonl(
        tmp_path / "log.jsonl",
        [
            {"usage": {"prompt_tokens": 100, "completion_tokens": 20}},
            {"usage": {"prompt_tokens": 7, "completion_tokens": 3}},
        ],
    )
    pairs, info = read_length_pairs(f)
    assert pairs.tolist() == [[100, 20], [7, 3]] and info["fields"] == [
        "usage.prompt_tokens",
        "usage.completion_tokens",
    ]
    csv = tmp_path / "log.csv"
    csv.write_text("input_tokens,output_tokens\n5,6\n7,8\n")
    assert read_length_pairs(csv)[0].tolist() == [[5, 6], [7, 8]]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"input_tokens": 5, "output_tokens": 6}, {"input_tokens": 5}])
    with pytest.raises(DatasetError, match=r"bad.jsonl, line 2: missing output_tokens"):
        read_length_pairs(bad)
    wrong = write_jsonl(tmp_path / "wrong.jsonl", [{"a": 1}])
    with pytest.raises(DatasetError, match=r"line 1: no token counts found"):
        read_length_pairs(wrong)


def test_azure_trace_csv(tmp_path):
    f = tmp_path / "azure.csv"
    f.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    rows, info = read_trace(f)
    assert info["layout"] == "azure"
    assert rows[1].timestamp_s - rows[0].timestamp_s == pytest.approx(4.314579, abs=1e-5)
    assert (rows[0].input_tokens, rows[0].output_tokens) == (374, 44)


def test_mooncake_trace_jsonl_ms_and_hash_ids(tmp_path):
    f = write_jsonl(
        tmp_path / "mc.jsonl",
        [
            {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]},
            {"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [46, 49]},
        ],
    )
    rows, info = read_trace(f)
    assert info["layout"] == "mooncake"
    assert [r.timestamp_s for r in rows] == [0.0, 27.482]  # sorted, ms -> s
    assert rows[1].hash_ids == (46, 47, 48)


def test_generic_trace_and_its_errors(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("timestamp,input_tokens,output_tokens,prefix_id\n0.5,10,2,sys\n1.5,12,3,\n")
    rows, _ = read_trace(f)
    assert [(r.timestamp_s, r.prefix_id) for r in rows] == [(0.5, "sys"), (1.5, None)]
    assert read_trace(f, time_unit="ms")[0][1].timestamp_s == pytest.approx(0.0015)
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,input_tokens,output_tokens\n0,10,2\n1,ten,2\n")
    with pytest.raises(DatasetError, match=r"bad.csv, line 3: input_tokens must be a whole number"):
        read_trace(bad)
    cols = tmp_path / "cols.csv"
    cols.write_text("when,in,out\n0,1,2\n")
    with pytest.raises(DatasetError, match=r"cols.csv, line 2: unknown trace columns"):
        read_trace(cols)
    ts = tmp_path / "ts.csv"
    ts.write_text("timestamp,input_tokens,output_tokens\nyesterday,1,2\n")
    with pytest.raises(DatasetError, match="neither a number nor a date"):
        read_trace(ts)


def test_a_trace_claiming_a_billion_tokens_is_refused_not_believed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 38, class 3: a line claiming 10^9 input tokens took bench to 7.9 GB and a traceback."""
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_tokens": 10, "output_tokens": 5}\n')
    f.write_text(f.read_text() + '{"timestamp": 1, "input_tokens": 1000000000, "output_tokens": 5}\n')
    with pytest.raises(DatasetError, match=r"line 2: input_tokens 1000000000 is past the bound of 10,000,"):
        read_trace(f)


def test_records_claiming_a_billion_tokens_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rec = {"sent_ns": 1, "status": "ok", "request_id": "a", "prompt_tokens": 10**9, "output_tokens": 3}
    f = tmp_path / "records.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DatasetError, match="past the bound of 10,000,000 per request"):
        read_trace(f)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_line_past_the_bound_is_refused_naming_it_never_read_whole(tmp_path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    """Issue 38, class 3: a 100 MB line was accepted (458 MB, results written)."""
    from tokenpace.adapters.datasets.rows import MAX_LINE_BYTES

    f = tmp_path / f"t{suffix}"
    if suffix == ".csv":
        long = "5" * (MAX_LINE_BYTES + 10)
        f.write_text("timestamp,input_tokens,output_tokens\n0,10,5\n1,10," + long + "\n")
    else:
        pad = "x" * (MAX_LINE_BYTES + 10)
        f.write_text(
            '{"timestamp": 0, "input_tokens": 10, "output_tokens": 5}\n'
            f'{{"timestamp": 1, "input_tokens": 10, "output_tokens": 5, "pad": "{pad}"}}\n'
        )
    with pytest.raises(DatasetError, match=r"line [23]: line over 1 MiB: not read"):
        read_trace(f)
