"""`tokenpace ui`: serves the store read-only on 127.0.0.1 until SIGTERM; any other address
without an access key, a bad --listen or a missing store is one line and exit 2."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

from app.console.console_fixtures import make_store
from baseline_fixtures import tokenpace

from tokenpace.testing.procs import free_port, start_service, wait_listening


def test_ui_serves_the_store_and_stops_on_sigterm(tmp_path: Path) -> None:
    make_store(tmp_path / "runs.db").close()
    port = free_port()
    proc = start_service("ui", "--store", str(tmp_path / "runs.db"), "--listen", f"127.0.0.1:{port}")
    try:
        wait_listening(port, proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs?valid=no", timeout=30) as resp:
            data = json.loads(resp.read())
        assert [r["id"] for r in data["runs"]] == ["night05"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    make_store(tmp_path / "runs.db").close()
    store = ["--store", str(tmp_path / "runs.db")]
    wide = tokenpace("ui", *store, "--listen", "0.0.0.0:8089")
    assert wide.returncode == 2 and "needs --access-key-file" in wide.stderr
    assert len(wide.stderr.strip().splitlines()) == 1
    bad = tokenpace("ui", *store, "--listen", "8089")
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    missing = tokenpace("ui", "--store", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no store at" in missing.stderr and "Traceback" not in missing.stderr
