"""Every sweep step is a full run in the store, like a bench run."""

import subprocess
import sys

from tokenpace.app.baseline.store_ops import open_store
from tokenpace.testing.procs import FINISHED


def test_sweep_stores_each_step_with_its_records(threaded_server, tmp_path):
    db = tmp_path / "runs.db"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenpace",
            "sweep",
            "--url",
            threaded_server.url,
            "--model",
            "ok",
            "--concurrency",
            "1,2",
            "-n",
            "5",
            "--output-len",
            "4",
            "--store",
            str(db),
            "--out",
            str(tmp_path / "sw.json"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode in FINISHED, p.stderr
    store = open_store(str(db))
    runs = store.list_runs()
    assert len(runs) == 2
    assert all(r.record_count == 5 for r in runs)
