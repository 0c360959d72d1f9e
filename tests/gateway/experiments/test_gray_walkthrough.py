"""docs/gateway.md's gray-release walkthrough, run as written (ports and upstreams replaced): the
1 % step holds, the 50 % step with a slower, more complained-about arm b is rolled back, and the
100 % gateway serves b alone."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
from conftest import ThreadedServer

from gateway.gray_traffic import CHAT, users_with_outcomes
from gateway.operations.test_admin import DOCS, _wait_listening
from tokenpace.gateway.config.config import parse_upstream
from tokenpace.gateway.request_path.router import Router
from tokenpace.testing.procs import free_port, run_cli
from tokenpace.testing.scripted_server import Script, ScriptedServer

FRAME = "tokenpace gateway --listen 127.0.0.1:9000 --admin-listen 127.0.0.1:9100 --store runs.db \\\n"
OLD, NEW = "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"
STEP_1 = FRAME + f"  --upstream a={OLD},weight=99,version=v1 \\\n  --upstream b={NEW},weight=1,version=v2"
STEP_50 = FRAME + f"  --upstream a={OLD},weight=50,version=v1 \\\n  --upstream b={NEW},weight=50,version=v2"
STEP_100 = FRAME + f"  --upstream b={NEW},version=v2"
CURL_REQUEST = (
    "curl -s http://127.0.0.1:9100/tokenpace/events -d "
    '\'{"request_id": "REQUEST_ID", "event": "task_completed"}\''
)
CURL_USER = 'curl -s http://127.0.0.1:9100/tokenpace/events -d \'{"user_id": "alice", "event": "complaint"}\''
ARMS = (
    "tokenpace arms --session SESSION --store runs.db --guard ttft.p95=+10%,error_rate=+0.5pp,complaint=+0pp"
)


class Gateway:
    """One step's gateway, started from the documented command line."""

    def __init__(self, command: str, cwd: Path, urls: dict[str, str]) -> None:
        self.port, self.admin = free_port(), free_port()
        line = command.replace("\\\n", " ").replace("127.0.0.1:9000", f"127.0.0.1:{self.port}")
        line = line.replace("127.0.0.1:9100", f"127.0.0.1:{self.admin}")
        for doc_url, real in urls.items():
            line = line.replace(doc_url, real)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenpace", *line.split()[1:]],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        _wait_listening(self.port, self.proc)
        _wait_listening(self.admin, self.proc)
        self.session = self._session()

    def _session(self) -> str:
        assert self.proc.stderr is not None
        for _ in range(10):  # the start-up lines; the session id is on the second
            m = re.search(r"as session ([0-9a-f]+)", self.proc.stderr.readline())
            if m:
                return m.group(1)
        raise AssertionError("the gateway printed no session id")

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return err

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _curl(command: str, admin: int) -> str:
    argv = ["curl", *[a.strip("'") for a in re.findall(r"'[^']*'|\S+", command)[1:]]]
    argv = [a.replace("127.0.0.1:9100", f"127.0.0.1:{admin}") for a in argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def _arms(cwd: Path, session: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*ARMS.replace("SESSION", session).split()[1:], "--resamples", "300", cwd=str(cwd))


def _arm_of(users: list[str], weights: tuple[int, int]) -> dict[str, str]:
    """The gateway's own sticky choice (rendezvous hashing is deterministic)."""
    ups = (parse_upstream(f"a={OLD},weight={weights[0]}"), parse_upstream(f"b={NEW},weight={weights[1]}"))
    router = Router(ups, time.monotonic)
    return {u: router.choose(None, u.encode()).arm for u in users}


async def _one_request(url: str, headers: dict[str, str]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(url + "/v1/chat/completions", json=CHAT, headers=headers) as r,
    ):
        await r.read()
        return r.status, r.headers["x-request-id"]


def test_the_documented_gray_release(tmp_path: Path) -> None:
    text = DOCS.read_text()
    for command in (STEP_1, STEP_50, STEP_100, CURL_REQUEST, CURL_USER, ARMS):
        assert command in text, command
    if shutil.which("curl") is None:
        pytest.skip("curl not installed")
    fast, slow = Script(ttft_s=0.005, itl_s=0.001), Script(ttft_s=0.060, itl_s=0.001)
    with ThreadedServer(ScriptedServer(fast)) as old, ThreadedServer(ScriptedServer(slow)) as new:
        urls = {OLD: old.url, NEW: new.url}

        step = Gateway(STEP_1, tmp_path, urls)  # 1 %
        try:
            users = [f"user-{i}" for i in range(100)]
            rates, admin = {"a": 0.02, "b": 0.5}, f"http://127.0.0.1:{step.admin}"
            asyncio.run(
                users_with_outcomes(step.url, admin, users, rates, _arm_of(users, (99, 1)), per_user=1)
            )
            status, rid = asyncio.run(_one_request(step.url, {"x-user-id": "alice"}))
            assert status == 200
            for command in (CURL_REQUEST.replace("REQUEST_ID", rid), CURL_USER):  # the id it got back
                assert orjson.loads(_curl(command, step.admin)) == {"accepted": 1, "unknown_request_ids": 0}
        finally:
            step.stop()
        held = _arms(tmp_path, step.session)
        assert held.returncode == 2 and "VERDICT: HOLD" in held.stdout, held.stdout + held.stderr
        assert held.stdout.startswith("sample ratio (users)") and "MISMATCH" not in held.stdout

        step = Gateway(STEP_50, tmp_path, urls)  # 50 %: b is slower and draws more complaints
        try:
            users = [f"user-{i}" for i in range(160)]
            rates, admin = {"a": 0.02, "b": 0.45}, f"http://127.0.0.1:{step.admin}"
            asyncio.run(users_with_outcomes(step.url, admin, users, rates, _arm_of(users, (50, 50))))
        finally:
            step.stop()
        rolled = _arms(tmp_path, step.session)
        assert rolled.returncode == 1 and "VERDICT: ROLL BACK" in rolled.stdout, rolled.stdout + rolled.stderr

        step = Gateway(STEP_100, tmp_path, urls)  # 100 %: b alone
        try:
            assert asyncio.run(_one_request(step.url, {"x-user-id": "bob"}))[0] == 200
        finally:
            assert "records: 1 written, 0 dropped" in step.stop()
