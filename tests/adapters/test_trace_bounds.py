"""Hostile traces through `tokenpace bench --trace FILE`: a timestamp that is not finite (the
file's line named), one of 1e308 or 1e12 seconds (a replay of years, refused against the bound
core.workload.trace.MAX_REPLAY_S at the trace's --speedup), request records likewise: one line,
exit 2, never a traceback and never a wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenpace.core.workload.trace import MAX_REPLAY_S, TraceRow, replay_problem
from tokenpace.testing.procs import run_cli

HEAD = "timestamp,input_tokens,output_tokens\n0,10,5\n"
RECORD = '{{"request_id":"{i}","status":"ok","sent_ns":{ns},"prompt_tokens":5,"output_tokens":3}}\n'
FIRST = RECORD.format(i="a", ns=1000)


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("big.csv", HEAD + "1e308,10,5\n", "more than 7 days"),
        ("years.csv", HEAD + "1e12,10,5\n", "more than 7 days"),
        ("nan.csv", HEAD + "nan,10,5\n", "line 3: timestamp 'nan' is not a finite number"),
        ("inf.jsonl", '{"timestamp": 0, "input_tokens": 3, "output_tokens": 2}\n'
                      '{"timestamp": "inf", "input_tokens": 3, "output_tokens": 2}\n', "not a finite number"),
        ("records.jsonl", FIRST + RECORD.format(i="b", ns="1e308"), "more than 7 days"),
        ("records_nan.jsonl", FIRST + RECORD.format(i="b", ns='"nan"'), "cannot be replayed"),
    ],
)  # fmt: skip
def test_a_hostile_trace_is_one_line_and_exit_2(tmp_path: Path, name: str, text: str, said: str) -> None:
    (tmp_path / name).write_text(text)
    done = run_cli("bench", "--sim", "llama-3.1-8b-h100", "--trace", name, "--no-store", cwd=str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_bound_is_on_the_replay_at_its_speed() -> None:
    rows = [TraceRow(0.0, 1, 1), TraceRow(30 * 86_400.0, 1, 1)]  # a month
    assert replay_problem(rows) is not None
    assert replay_problem(rows, speedup=10.0) is None  # three days at 10x
    assert replay_problem([TraceRow(0.0, 1, 1), TraceRow(MAX_REPLAY_S, 1, 1)]) is None
