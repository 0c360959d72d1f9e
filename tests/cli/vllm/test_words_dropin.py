"""Words people read: no empty column in `runs list`, no dangling unit in the virtual table's
header, token counts as whole numbers in the input-length sweep, the intervals' true name."""

from __future__ import annotations

from tokenpace.cli.bench.sweep_cmd import _tokens
from tokenpace.core.metrics import DEFINITIONS
from tokenpace.testing.procs import run_cli


def test_runs_list_has_no_empty_last_column(tmp_path):
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    r = run_cli(
        "bench", "-n", "2", "--input-len", "8", "--output-len", "2", "--store", store, cwd=str(tmp_path)
    )
    assert r.returncode in (0, 3), r.stderr
    listed = run_cli("runs", "list", "--store", store, env={"COLUMNS": "200"}).stdout
    header = next(line for line in listed.splitlines() if "run" in line and "model" in line)
    assert not header.rstrip().rstrip("|").rstrip().endswith("|")  # ... | E2E p95 ms |, no "|  |"


def test_virtual_table_header_ends_with_a_column_not_a_unit():
    out = run_cli("sim", "--virtual", "--requests", "20").stdout.splitlines()
    assert "latencies in ms" in out[0]
    header = next(line for line in out if "TTFT p50" in line)
    assert header.rstrip(" |").endswith("out tok/s") and "(ms)" not in header


def test_sweep_token_means_read_as_whole_numbers():
    assert (_tokens(267.0), _tokens(1035.4), _tokens(None)) == ("267", "1,035", "-")


def test_definitions_name_the_order_statistic_interval_not_a_bootstrap():
    assert "bootstrap" not in DEFINITIONS["percentiles"]
    assert "order-statistic interval" in DEFINITIONS["percentiles"]
