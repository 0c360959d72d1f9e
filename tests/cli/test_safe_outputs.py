"""Files, signals and absurd numbers (issue 13, item 9): outputs never replace a device or a pipe,
bad paths and values are one line before any load, SIGTERM exits 143 with everything saved, the
auto-abort names its reason, and a read command on a missing store creates nothing."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from tokenpace.adapters.safe_files import OutputPathError, check_output, write_atomic
from tokenpace.adapters.servermetrics import ScraperProcess, probe_metrics_url
from tokenpace.app.bench.bench import MAX_CONSECUTIVE_CONNECT_ERRORS, BenchConfig, BenchRun
from tokenpace.core.record import Status
from tokenpace.core.workload.lengths import MAX_TOKENS, parse_length
from tokenpace.testing.procs import FINISHED
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.wire import pool as pool_module

PASSWORD = "pa55-w0rd-XYZ"


def tokenpace(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True, timeout=timeout
    )


def bench_args(url: str, out: Path, *extra: str) -> list[str]:
    return ["bench", "--url", url, "--model", "ok", "-c", "2", "-n", "4", "--output-len", "4",
            "--server-metrics", "off", "--no-store", "--out", str(out), "-q", *extra]  # fmt: skip


def one_line_error(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in lines[0]


# --- outputs: new paths or regular files only, checked before any load ---


def test_out_on_a_fifo_is_refused_before_any_load_and_the_fifo_stays(threaded_server, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    for out in (fifo, link):
        p = tokenpace(*bench_args(threaded_server.url, out))
        one_line_error(p, "--out", "not a regular file")
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a regular file
    assert threaded_server.stats.requests == 0


def test_out_on_a_character_device_is_refused_and_the_node_stays(threaded_server, tmp_path):
    """The issue's `--out /dev/full` as root, on a private copy of the device node."""
    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o644, os.makedev(1, 7))
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here (not root, or a container forbids it)")
    p = tokenpace(*bench_args(threaded_server.url, full))
    one_line_error(p, "--out", "not a regular file")
    assert stat.S_ISCHR(os.stat(full).st_mode)
    assert threaded_server.stats.requests == 0


def test_records_beside_the_result_on_a_device_are_refused(threaded_server, tmp_path):
    out = tmp_path / "r.json"
    os.mkfifo(tmp_path / "r.records.jsonl")
    p = tokenpace(*bench_args(threaded_server.url, out))
    one_line_error(p, "--out", "r.records.jsonl")
    assert threaded_server.stats.requests == 0


def test_out_under_a_file_is_one_line_before_any_load(threaded_server, tmp_path):
    (tmp_path / "afile").write_text("x")
    p = tokenpace(*bench_args(threaded_server.url, tmp_path / "afile" / "r.json"))
    one_line_error(p, "--out", "afile")
    assert threaded_server.stats.requests == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_out_folder_is_one_line_before_any_load(threaded_server, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        p = tokenpace(*bench_args(threaded_server.url, folder / "r.json"))
    finally:
        folder.chmod(0o700)
    one_line_error(p, "--out", "not writable")
    assert threaded_server.stats.requests == 0


def test_write_atomic_replaces_a_file_whole_and_keeps_its_mode(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    path.chmod(0o640)
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OutputPathError):
        write_atomic(tmp_path / "fifo", b"x")
    with pytest.raises(OutputPathError):
        check_output(tmp_path, "--out")  # a folder
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)


def test_report_exports_refuse_a_device_before_writing_any(threaded_server, tmp_path):
    result = tmp_path / "r.json"
    assert tokenpace(*bench_args(threaded_server.url, result)).returncode in FINISHED
    os.mkfifo(tmp_path / "t.csv")
    p = tokenpace("report", str(result), "--md", str(tmp_path / "t.md"), "--csv", str(tmp_path / "t.csv"))
    one_line_error(p, "--csv", "not a regular file")
    assert not (tmp_path / "t.md").exists()


def test_gateway_records_on_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "rec.jsonl")
    p = tokenpace(
        "gateway", "--upstream", "a=http://127.0.0.1:9/v1", "--records", str(tmp_path / "rec.jsonl"),
        "--no-store", timeout=30,
    )  # fmt: skip
    one_line_error(p, "--records", "not a regular file")


# --- absurd numbers: one line naming the flag ---


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--rate", "nan"),
        ("--rate", "inf"),
        ("--rate", "-1"),
        ("--seed", "-1"),
        ("--input-len", "1e12"),
        ("--input-len", "nan"),
        ("--output-len", "10:1e9"),
        ("--concurrency", "10000000"),
        ("--temperature", "nan"),
        ("--top-p", "inf"),
        ("--burstiness", "nan"),
        ("--prefix-len", "10000000000"),
        ("--turns", "0"),
        ("--speedup", "inf"),
        ("--duration", "100000h"),
        ("--timeout", "9999999h"),
    ],
)
def test_absurd_numbers_are_one_line_naming_the_flag(threaded_server, tmp_path, flag, value):
    args = bench_args(threaded_server.url, tmp_path / "r.json")
    if flag in ("--rate", "--concurrency"):
        args[args.index("-c") : args.index("-c") + 2] = []  # --rate and -c exclude each other
    p = tokenpace(*args, flag, value)
    one_line_error(p, flag)
    assert threaded_server.stats.requests == 0


def test_length_bounds_are_documented_and_samples_stay_inside():
    import numpy as np

    assert parse_length(str(MAX_TOKENS)).params == (MAX_TOKENS,)
    wide = parse_length("lognormal:1000000,50")
    assert wide.sample(np.random.default_rng(0), 1000).max() <= MAX_TOKENS
    readme = (Path(__file__).resolve().parents[2] / "docs" / "bench-reference.md").read_text()
    assert "1,048,576" in readme


# --- signals and stops ---


def test_sigterm_exits_143_and_keeps_every_record(threaded_server, tmp_path):
    out = tmp_path / "r.json"
    args = bench_args(threaded_server.url, out)
    args[args.index("-n") + 1] = "100000"
    args[args.index("--output-len") + 1] = "64"
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    records = tmp_path / "r.records.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not records.exists() or records.stat().st_size == 0):
        time.sleep(0.1)  # some requests finished (records are flushed as they end)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    result = json.loads(out.read_text())
    assert result["interrupted"] is True and result["stop_reason"] == "interrupted by SIGTERM"
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(lines) == result["records"]["count"] > 0
    cancelled = [r for r in lines if r["status"] == "cancelled"]
    assert cancelled and all("SIGTERM" in r["error"] for r in cancelled)


def test_sweep_sigterm_exits_143_with_the_steps_saved(threaded_server, tmp_path):
    out = tmp_path / "sweep.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", "sweep", "--url", threaded_server.url, "--model", "ok",
         "-c", "2,1", "-n", "20", "--output-len", "30", "--server-metrics", "off", "--no-store",
         "--out", str(out), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:  # written when step 1 finished
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and doc["steps"] and doc["stop_reason"] == "interrupted by SIGTERM"


def test_the_connect_error_abort_labels_requests_in_flight_with_its_reason(monkeypatch):
    """Two requests hang on a live connection while the other users cannot connect: the abort
    after 50 connect errors cancels the two, and says why (not "cancelled by the user")."""
    real_dial = pool_module.dial
    dialled = []

    async def dial(host, port, ssl_context, resolver=None):
        dialled.append(1)
        if len(dialled) > 2:
            raise ConnectionRefusedError
        return await real_dial(host, port, ssl_context, resolver)

    monkeypatch.setattr(pool_module, "dial", dial)

    async def go():
        async with ScriptedServer(Script(ttft_s=30)) as srv:
            cfg = BenchConfig(url=srv.url, model="m", concurrency=4, requests=1000, server_metrics="off")
            return await BenchRun(cfg).run()

    result = asyncio.run(go())
    assert result.stop_reason.startswith("aborted") and not result.interrupted
    assert result.summary.counts["connect_error"] >= MAX_CONSECUTIVE_CONNECT_ERRORS
    cancelled = [r for r in result.records if r.status is Status.CANCELLED]
    assert len(cancelled) == 2
    assert all("could not connect" in r.error and "user" not in r.error for r in cancelled)


# --- credentials of a metrics URL: off the scraper's command line ---


class _Metrics(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str | None]] = []

    def do_GET(self):
        _Metrics.seen.append(self.headers.get("Authorization"))
        body = b"vllm:num_requests_running 0\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_metrics_url_credentials_go_by_environment_not_argv(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://bob:{PASSWORD}@127.0.0.1:{server.server_address[1]}/metrics"
    try:
        assert probe_metrics_url(url) is None
        scraper = ScraperProcess(url, 0.2, tmp_path / "s.jsonl")
        scraper.start()
        assert scraper.proc is not None
        cmdline = Path(f"/proc/{scraper.proc.pid}/cmdline").read_bytes()
        assert PASSWORD.encode() not in cmdline and b"bob" not in cmdline
        assert scraper.wait_first_scrape()
        scrapes = scraper.stop()
    finally:
        server.shutdown()
    assert scrapes and "samples" in scrapes[0]
    assert _Metrics.seen and all(s and s.startswith("Basic ") for s in _Metrics.seen)
    problem = probe_metrics_url(f"http://bob:{PASSWORD}@127.0.0.1:9/metrics")
    assert problem and PASSWORD not in problem


# --- read commands on a missing store create nothing ---


@pytest.mark.parametrize(
    "args",
    [["runs", "list"], ["runs", "show", "abc"], ["compare", "a", "b"], ["history", "--metric", "ttft.p95"]],
)
def test_read_commands_on_a_missing_store_create_nothing(tmp_path, args):
    store = tmp_path / "nowhere" / "runs.db"
    p = tokenpace(*args, "--store", str(store))
    one_line_error(p, f"no store at {store}")
    assert not (tmp_path / "nowhere").exists()
