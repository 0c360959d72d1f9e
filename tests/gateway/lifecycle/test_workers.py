"""--workers N: processes share the port (SO_REUSEPORT), /metrics sums them all, and every record
reaches the one writer in the parent."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp

from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.workers import WorkerPool
from tokenpace.testing.procs import free_port, running, wait_listening
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
N = 40


def requests_total(text: str) -> float:
    return sum(float(v) for v in re.findall(r"^tokenpace_gateway_requests_total\{.*\} (\S+)$", text, re.M))


def test_two_workers_share_the_port_sum_their_metrics_and_send_every_record(tmp_path: Path) -> None:
    records: list[RequestRecord] = []

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                workers=2,
                records_path=str(tmp_path / "records.jsonl"),
                admin_host="127.0.0.1",
                admin_port=0,
            )
            async with WorkerPool(config, writer=records.extend) as pool:  # type: ignore[arg-type]
                # a new connection per request: the kernel spreads connections, not requests
                connector = aiohttp.TCPConnector(force_close=True)
                async with aiohttp.ClientSession(connector=connector) as s:

                    async def one() -> bytes:
                        async with s.post(pool.url + "/v1/chat/completions", json=CHAT) as r:
                            assert r.status == 200
                            return await r.read()

                    bodies = await asyncio.gather(*(one() for _ in range(N)))
                    assert all(b.endswith(b"data: [DONE]\n\n") for b in bodies)
                    text = ""
                    for _ in range(500):  # a record is finished just after its last byte
                        async with s.get(pool.admin_url + "/metrics") as r:
                            text = await r.text()
                        if requests_total(text) == N:
                            break
                        await asyncio.sleep(0.01)
                    assert requests_total(text) == N  # summed over both workers
                    assert "tokenpace_gateway_requests_in_flight 0.0" in text

    asyncio.run(asyncio.wait_for(main(), 90))
    assert len(records) == N and all(r.status is Status.OK for r in records)
    assert {r.worker for r in records} == {0, 1}  # both carried traffic
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == N


# docs/gateway.md shows this command (ports aside); the test runs it.
DOC_COMMAND = (
    "tokenpace gateway --listen 127.0.0.1:9000 --upstream a=http://127.0.0.1:8000/v1 --workers 2 \\\n"
    "  --records gateway.jsonl --no-store"
)


def test_documented_workers_command(tmp_path: Path, threaded_server) -> None:
    import os
    import signal
    import subprocess
    import sys

    from gateway.operations.test_admin import DOCS

    assert DOC_COMMAND in DOCS.read_text()
    port = free_port()
    argv = DOC_COMMAND.replace("\\\n", " ").split()[1:]
    argv = [
        a.replace("127.0.0.1:9000", f"127.0.0.1:{port}").replace(
            "http://127.0.0.1:8000/v1", threaded_server.url
        )
        for a in argv
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_listening(port, proc)

        async def traffic() -> None:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
                for _ in range(10):
                    async with s.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT) as r:
                        assert r.status == 200
                        await r.read()

        asyncio.run(asyncio.wait_for(traffic(), 30))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert "records: 10 written, 0 dropped" in err.decode()
    assert len((tmp_path / "gateway.jsonl").read_text().splitlines()) == 10


def test_a_taken_port_is_one_line_and_exit_2(threaded_server) -> None:
    import socket

    from click.testing import CliRunner

    from tokenpace.cli.main import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for workers in ("1", "2"):
            args = ["gateway", "--listen", f"127.0.0.1:{port}", "--upstream", f"a={threaded_server.url}"]
            result = CliRunner().invoke(cli, [*args, "--no-store", "--workers", workers])
            assert result.exit_code == 2, result.output
            assert "cannot serve" in result.output and "Traceback" not in result.output


def test_workers_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    """No orphan gateway serves on after its parent died (SIGKILL gives the parent no say)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    port = free_port()
    cmd = ["gateway", "--listen", f"127.0.0.1:{port}", "--upstream", "a=http://127.0.0.1:9/v1"]
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", *cmd, "--workers", "2", "--no-store"])
    try:
        wait_listening(port, proc)
        kids = [int(k) for t in os.listdir(f"/proc/{proc.pid}/task") for k in _read(proc.pid, t).split()]
        assert len(kids) >= 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 20  # a liveness bound: the watch looks every second
    alive = kids
    while alive and time.monotonic() < deadline:
        alive = [k for k in alive if running(k)]
        time.sleep(0.1)
    for k in alive:  # do not leave them behind even if the test fails
        os.kill(k, signal.SIGKILL)
    assert not alive


def _read(pid: int, task: str) -> str:
    with open(f"/proc/{pid}/task/{task}/children") as fh:  # workers start from a helper thread
        return fh.read()
