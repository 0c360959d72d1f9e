"""The records file's line is built in C, and must stay byte for byte what ``to_dict`` gives."""

from __future__ import annotations

import orjson
import pytest

from tokenpace.adapters.results import RecordWriter, read_records, record_line, rewrite_records
from tokenpace.core.record import RequestRecord, Status


def _records() -> list[RequestRecord]:
    ok = RequestRecord("tp-1", index=1, worker=3, labels={"engine": "vllm", "gpu": "h100"})
    ok.sent_ns, ok.first_token_ns, ok.end_ns = 10, 20, 90
    ok.token_ns = [20, 30, 40]
    ok.output_tokens_counted = 3
    ok.output_tokens_server = 5
    ok.chunk_tokens = [1, 2, 2]
    ok.prefix_hashes = [2**63 - 1, 7]
    ok.finish_reason = "stop"
    ok.upstream_inflight = 3  # the gateway's load at dispatch
    failed = RequestRecord("tp-2", warmup=True, status=Status.STREAM_INTERRUPTED, error='cut "mid" ünïcode')
    implausible = RequestRecord("tp-3", output_tokens_server=10**12, output_tokens_counted=2)
    resent = RequestRecord("tp-4", attempts=2, first_sent_ns=5, connect_ns=None, tls_ns=None)
    resent.prompt_text, resent.trace_sampled = "hello\nworld", False
    resent.client_stall_ms = 12.5  # what the client's own stalls could have added to it
    return [ok, failed, implausible, resent, RequestRecord("tp-5")]


@pytest.mark.parametrize("record", _records(), ids=lambda r: r.request_id)
def test_a_record_line_is_what_to_dict_gives(record: RequestRecord) -> None:
    assert record_line(record) == orjson.dumps(record.to_dict()) + b"\n"


def test_records_written_read_back_equal(tmp_path) -> None:
    path = tmp_path / "r.records.jsonl"
    writer = RecordWriter(path)
    for record in _records():
        writer.write(record)
    writer.close()
    assert read_records(path) == _records()


def test_a_line_written_before_the_load_field_reads_back_without_it() -> None:
    old = orjson.loads(record_line(RequestRecord("tp-old")))
    del old["upstream_inflight"]
    assert RequestRecord.from_dict(old).upstream_inflight is None


def test_records_rewritten_after_the_run_replace_the_file_whole(tmp_path) -> None:
    path = tmp_path / "r.records.jsonl"
    writer = RecordWriter(path)
    for record in _records():
        writer.write(record)
    writer.close()
    marked = _records()
    marked[0].client_stall_ms = 3.5
    rewrite_records(path, marked)
    assert read_records(path) == marked and [p.name for p in tmp_path.iterdir()] == [path.name]
