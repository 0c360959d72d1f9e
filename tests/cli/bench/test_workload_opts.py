"""Workload flags as a user runs them: bad files stop before any load with exit 2 and one line
naming the file and line; good ones run end to end and show their breakdowns."""

import json

import pytest

from tokenpace.testing.procs import FINISHED, run_cli


def tokenpace(*args, timeout=60):
    return run_cli(*args, timeout=timeout)


@pytest.mark.parametrize(
    "flag, name, content, needle",
    [
        ("--dataset", "d.jsonl", '{"prompt": "a"}\n{oops\n', "d.jsonl, line 2: not valid JSON"),
        ("--dataset", "missing.jsonl", None, "missing.jsonl: no such file"),
        ("--lengths-from", "log.jsonl", "", "log.jsonl: the file is empty"),
        ("--trace", "t.csv", "time,in,out\n1,2,3\n", "t.csv, line 2: unknown trace columns"),
        ("--tokenizer", "tok.json", "{}", "tok.json: not a Hugging Face tokenizer.json"),
    ],
)
def test_bad_files_exit_2_before_any_load(threaded_server, tmp_path, flag, name, content, needle):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    before = threaded_server.stats.requests
    p = tokenpace(
        "bench", "--url", threaded_server.url, "--model", "ok", "-n", "3", flag, str(path), "-q", "--no-store"
    )
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1
    assert threaded_server.stats.requests == before  # not even one request sent


def test_trace_and_dataset_runs_from_the_command_line(threaded_server, tmp_path):
    trace = tmp_path / "azure.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.000,20,4\n2023-11-16 18:15:46.100,300,40\n2023-11-16 18:15:46.200,20,4\n"
    )
    out = tmp_path / "r.json"
    common = ("--url", threaded_server.url, "--model", "ok", "--out", str(out), "-q", "--no-store")
    p = tokenpace("bench", *common, "--trace", str(trace), "--speedup", "2")
    assert p.returncode in FINISHED, p.stderr
    result = json.loads(out.read_text())
    assert result["summary"]["counts"]["sent"] == 3  # the whole trace, by default
    assert result["conditions"]["load"]["arrival"] == "trace"
    assert result["conditions"]["workload"]["layout"] == "azure"
    assert "By length bin" in p.stdout and "trace" in p.stdout
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"hello number {i}", "output_len": 3}) for i in range(5)))
    p = tokenpace("bench", *common, "--dataset", str(data), "-n", "5", "-c", "2", "--turns", "2")
    assert p.returncode in FINISHED, p.stderr
    result = json.loads(out.read_text())
    assert [t["turn"] for t in result["summary"]["breakdown"]["turns"]] == [0, 1]
    assert "By turn" in p.stdout


def test_trace_refuses_a_load_flag(threaded_server, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"timestamp": 0, "input_tokens": 5, "output_tokens": 2}) + "\n")
    p = tokenpace(
        "bench", "--url", threaded_server.url, "--trace", str(trace), "--rate", "5", "-q", "--no-store"
    )
    assert p.returncode == 2 and "own clock" in p.stderr


def test_prompt_salt_from_the_command_line(tmp_path):
    """The docs/workloads.md example against the simulator: no salt, identical prompts for a seed."""
    out = tmp_path / "r.json"
    p = tokenpace("bench", "-n", "20", "-c", "2", "--input-len", "256", "--prompt-salt", "none",
                  "--output-len", "4", "--no-store", "-q", "--out", str(out), timeout=120)  # fmt: skip
    assert p.returncode in FINISHED, p.stderr
    doc = json.loads(out.read_text())
    assert doc["conditions"]["prompt_salt"] == "none"
    assert "prompt_salt" not in doc["conditions"]["workload"]
    bad = tokenpace("bench", "--prompt-salt", "a\nb", "-n", "1")
    assert bad.returncode == 2 and "--prompt-salt" in bad.stderr and "Traceback" not in bad.stderr


def _records_file(path, apis):
    rows = [
        {"request_id": f"r{i}", "status": "ok", "sent_ns": i * 100_000_000, "prompt_tokens": 10,
         "output_tokens": 2, "labels": {"api": api} if api else {}}
        for i, api in enumerate(apis)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_records_replay_with_a_window_and_only_their_api(threaded_server, tmp_path):
    records = tmp_path / "captured.jsonl"
    _records_file(records, ["chat", "responses", "chat", None, "chat"])
    out = tmp_path / "r.json"
    common = ("--url", threaded_server.url, "--model", "ok", "--out", str(out), "-q", "--no-store")
    p = tokenpace("bench", *common, "--trace", str(records), "--trace-window", "0s:350ms")
    assert p.returncode in FINISHED, p.stderr
    result = json.loads(out.read_text())
    workload = result["conditions"]["workload"]
    assert workload["layout"] == "records" and workload["window_s"] == pytest.approx([0.0, 0.35])
    assert workload["left_out_other_api"] == {"responses": 1}
    assert result["summary"]["counts"]["sent"] == 3  # r0, r2, r3: r1 another API, r4 past the window


def test_bad_replay_sources_exit_2_with_one_line(threaded_server, tmp_path):
    records = tmp_path / "captured.jsonl"
    _records_file(records, ["responses"])
    url = ("--url", threaded_server.url, "-q", "--no-store")
    for args, needle in (
        (("--trace", str(records)), "no request of the trace was made to --api chat"),
        (("--trace", str(records), "--trace-window", "10s"), "give FROM:TO"),
        (("--trace", str(records), "--trace-window", "5s:9s", "--api", "responses"), "no request"),
        (("--trace", "store:no-such-run", "--store", str(tmp_path / "none.db")), "no store at"),
    ):
        p = tokenpace("bench", *url, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert needle in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
