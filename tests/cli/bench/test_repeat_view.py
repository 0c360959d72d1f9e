"""`bench --repeat K --quiet`: a line per run instead of K dashboards, then what the group found."""

from tokenpace.testing.procs import run_cli


def test_quiet_repeats_print_a_line_per_run_not_its_dashboard(threaded_server, tmp_path):
    args = ["bench", "--url", threaded_server.url, "--model", "ok", "-c", "2", "-n", "8", "--output-len", "4"]
    args += ["--no-store", "--out", str(tmp_path / "r.json"), "--repeat", "2"]
    quiet = run_cli(*args, "--quiet", timeout=120)
    lines = [line for line in quiet.stdout.splitlines() if line.startswith("run ")]
    assert [line.split(":")[0] for line in lines] == ["run 1 of 2", "run 2 of 2"], quiet.stdout + quiet.stderr
    assert all("8 ok of 8" in line and "TTFT P95" in line for line in lines)
    assert "Latency (ms)" not in quiet.stdout and "Throughput" not in quiet.stdout
    # what the group found is still shown: its noise table, or why it has none (runs NOT VALID)
    assert "Noise between 2 runs" in quiet.stdout or "note:" in quiet.stdout
    loud = run_cli(*args, timeout=120)
    assert loud.stdout.count("Latency (ms)") == 2  # without --quiet: each run's dashboard
