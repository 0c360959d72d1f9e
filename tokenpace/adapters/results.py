"""Result files: the run's JSON (conditions + summary) and its records as JSON lines.

Records are written as they complete, so an interrupted or crashed run keeps what it measured.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import orjson

from tokenpace.adapters.bounded_read import read_bytes, read_lines
from tokenpace.adapters.safe_files import check_output, open_stream, write_atomic
from tokenpace.core.record import RequestRecord

_JSON_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

# Bounds of what is read back (a run's result and records files may be anyone's, or /dev/zero)
MAX_RESULT_BYTES = 256 * 1024 * 1024  # a result JSON: a summary, a sweep's steps (real ones: KB to MB)
MAX_RECORD_LINE_BYTES = (
    64 * 1024 * 1024
)  # one record: timestamps are capped (core/record.py); a kept text may not be
MAX_RECORDS_READ = 10_000_000  # records in one file (a run of 10 M requests)


def _beside(result_path: Path, suffix: str) -> Path:
    name = result_path.name
    stem = name[:-5] if name.endswith(".json") else name
    return result_path.with_name(stem + suffix)


def records_path_for(result_path: Path) -> Path:
    """The run's request records, beside its result."""
    return _beside(result_path, ".records.jsonl")


def scrapes_path_for(result_path: Path) -> Path:
    """Raw /metrics scrapes of the run, beside its result."""
    return _beside(result_path, ".server-metrics.jsonl")


def check_result_paths(result_path: Path, flag: str = "--out") -> None:
    """Before any load: the result, its records and its scrapes can all be written (OutputPathError)."""
    for path in (result_path, records_path_for(result_path), scrapes_path_for(result_path)):
        check_output(path, flag)


def record_line(record: RequestRecord) -> bytes:
    """The record as one JSON line, byte for byte ``orjson.dumps(record.to_dict()) + b"\n"``, but
    built in C: orjson writes a dataclass's fields itself, in order (a str enum as its value), and
    only the two derived fields are added. ``to_dict`` is ~100 Python calls a record (14 us with 64
    token timestamps), paid inside the run's event loop for every record; at 256 streams, 256 of
    them at each wave boundary, while other streams' chunks wait to be timestamped."""
    return b'%b,"output_tokens":%b,"output_tokens_source":%b}\n' % (
        orjson.dumps(record)[:-1],
        orjson.dumps(record.output_tokens),
        orjson.dumps(record.output_tokens_source),
    )


class RecordWriter:
    """Appends one JSON line per finished request; flushed at least every ``flush_every`` lines."""

    def __init__(self, path: Path, flush_every: int = 64) -> None:
        self.path = path
        self._file: IO[bytes] = open_stream(path)  # never a device or a pipe
        self._flush_every = flush_every
        self._pending = 0
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        self._file.write(record_line(record))
        self.count += 1
        self._pending += 1
        if self._pending >= self._flush_every:
            self._file.flush()
            self._pending = 0

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()


def rewrite_records(path: Path, records: Iterable[RequestRecord]) -> None:
    """The records file written again whole, line by line to a temporary file renamed over it: after
    a run whose client stalled, once each record says what the stalls could have added to it."""
    tmp = path.with_name(f".{path.name}.tmp")
    writer = RecordWriter(tmp, flush_every=1024)
    try:
        for record in records:
            writer.write(record)
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Written whole or not at all (a temporary file renamed over ``path``), never over a device."""
    write_atomic(path, orjson.dumps(result, option=_JSON_OPTS))


def read_result(path: Path) -> dict[str, Any]:
    """A result JSON read back (``report``, ``plan``), at most ``MAX_RESULT_BYTES``."""
    doc: dict[str, Any] = orjson.loads(read_bytes(path, MAX_RESULT_BYTES, "a result file"))
    return doc


def read_records(path: Path) -> list[RequestRecord]:
    """A records JSONL read back: lines of at most ``MAX_RECORD_LINE_BYTES``, at most
    ``MAX_RECORDS_READ`` of them."""
    records = []
    for _, line in read_lines(path, MAX_RECORD_LINE_BYTES, "a records file", MAX_RECORDS_READ):
        if line.strip():
            records.append(RequestRecord.from_dict(orjson.loads(line)))
    return records
