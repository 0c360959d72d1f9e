"""Issue 38, class 3: files read back had no bound (a profile, a fault file, a result, its records,
spans, scenario and key files, the scraper's output). One reader holds every read to its bound and
stops past it with one line naming the file (and the line), never reading the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenpace.adapters import results
from tokenpace.adapters.bounded_read import FileBoundError, read_bytes, read_lines, read_text


def test_a_whole_read_takes_at_most_its_bound(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 1024)
    assert read_bytes(f, 1024, "a test file") == b"x" * 1024
    with pytest.raises(FileBoundError, match=r"f: over 1023 bytes: not read \(the bound of a test file\)"):
        read_bytes(f, 1023, "a test file")
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(FileBoundError, match="not UTF-8 text"):
        read_text(f, 10, "a test file")


def test_an_endless_file_is_refused_after_its_bound() -> None:
    with pytest.raises(FileBoundError, match="over 64 KiB"):
        read_bytes("/dev/zero", 64 * 1024, "a test file")
    with pytest.raises(FileBoundError, match="line 1: line over 4 KiB"):
        list(read_lines("/dev/zero", 4096, "a test line"))


def test_lines_are_bounded_each_and_in_number(tmp_path: Path) -> None:
    f = tmp_path / "l.jsonl"
    f.write_bytes(b"a\nbb\n" + b"c" * 100 + b"\n")
    assert [n for n, _ in read_lines(f, 100, "x")] == [1, 2, 3]  # a line of exactly the bound passes
    with pytest.raises(FileBoundError, match="line 3: line over 99 bytes"):
        list(read_lines(f, 99, "x"))
    with pytest.raises(FileBoundError, match="line 3: more than 2 lines"):
        list(read_lines(f, 200, "x", max_lines=2))


def test_records_and_results_read_back_within_their_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baseline_fixtures import make_record

    path = tmp_path / "r.records.jsonl"
    path.write_text("".join(json.dumps(make_record(i, 50.0).to_dict()) + "\n" for i in range(3)))
    assert len(results.read_records(path)) == 3
    monkeypatch.setattr(results, "MAX_RECORDS_READ", 2)
    with pytest.raises(FileBoundError, match="line 3: more than 2 lines"):
        results.read_records(path)
    monkeypatch.setattr(results, "MAX_RECORD_LINE_BYTES", 64)
    with pytest.raises(FileBoundError, match="line 1: line over 64 bytes"):
        results.read_records(path)
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"summary": {}, "pad": "x" * 200}))
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", 100)
    with pytest.raises(FileBoundError, match=r"r\.json: over 100 bytes: not read"):
        results.read_result(result)


def test_every_reader_of_a_file_given_by_hand_refuses_past_its_bound(tmp_path: Path) -> None:
    from tokenpace.adapters.scenario_files import MAX_SCENARIO_BYTES, load_book
    from tokenpace.app.reports.trace_tail import MAX_SPAN_LINE_BYTES, iter_spans
    from tokenpace.gateway.config.secrets import MAX_KEY_FILE_BYTES, read_key_file, upstream_key
    from tokenpace.sim.endpoints.faults import MAX_FAULTS_BYTES, FaultConfig
    from tokenpace.sim.profiles.profile_file import MAX_PROFILE_BYTES, ProfileFileError, read_profile_file

    big = tmp_path / "big"
    with big.open("wb") as f:  # sparse: larger than every bound below, nothing written
        f.truncate(max(MAX_SCENARIO_BYTES, MAX_KEY_FILE_BYTES, MAX_FAULTS_BYTES, MAX_PROFILE_BYTES) + 1)
    with pytest.raises(ProfileFileError, match="big: over 1 MiB: not read"):
        read_profile_file(big)
    with pytest.raises(ValueError, match="over 64 KiB: not read"):
        FaultConfig.from_file(big)
    with pytest.raises(ValueError, match="over 1 MiB: not read"):  # ScenarioError
        load_book(big)
    with pytest.raises(ValueError, match="over 1 MiB: not read"):
        read_key_file(str(big))
    with pytest.raises(ValueError, match="over 1 MiB: not read"):
        upstream_key({"key_file": str(big)}, "up")
    spans = tmp_path / "spans.jsonl"
    with spans.open("wb") as f:
        f.truncate(MAX_SPAN_LINE_BYTES + 1)
    with pytest.raises(ValueError, match="line 1: line over 64 MiB"):
        list(iter_spans(spans))
