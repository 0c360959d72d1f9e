"""Shared fixtures: hand-made records and scripted servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Iterator

import pytest

from tokenpace.testing.scripted_server import Script, ScriptedServer

MS = 1_000_000

# Runs made by tests (bench auto-saves) go to a throwaway store, never the user's own library.
os.environ["TOKENPACE_STORE"] = os.path.join(tempfile.mkdtemp(prefix="tokenpace-tests-"), "runs.db")


class ThreadedServer:
    """A ScriptedServer on its own event loop in a thread, for tests that run the CLI."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


FAULTS = {
    "ok": Script(ttft_s=0.02, itl_s=0.002),
    "http500": Script(http_status=500),
    "http429": Script(http_status=429, retry_after=2),
    "http401": Script(http_status=401),
    "closed": Script(close_before_headers=True),
    "cut": Script(ttft_s=0.01, itl_s=0.002, cut_after=3),
    "malformed": Script(ttft_s=0.01, itl_s=0.002, malformed_after=2),
    "error_event": Script(ttft_s=0.01, itl_s=0.002, error_event_after=2),
    "stall": Script(ttft_s=0.01, itl_s=0.002, stall_after=2),
    "no_done": Script(ttft_s=0.01, itl_s=0.002, send_done=False),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``timing`` get two retries: their bounds are generous, but two busy cores can
    still starve a live queue once."""
    for item in items:
        if item.get_closest_marker("timing") is not None:
            item.add_marker(pytest.mark.flaky(reruns=2, reruns_delay=1))


@pytest.fixture
def threaded_server() -> Iterator[ScriptedServer]:
    with ThreadedServer(ScriptedServer(FAULTS["ok"], scripts=FAULTS)) as server:
        yield server
