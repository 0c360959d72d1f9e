"""The wire's hostile upstream: what it answers, and that building an answer never holds the
event loop it shares with the client or gateway under test."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest

from tokenpace.testing import wire_upstream
from tokenpace.testing.wire_upstream import BOMBS, WireUpstream


async def _ask(port: int, model: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = orjson.dumps({"model": model})
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head


@pytest.mark.parametrize("model", [*sorted(BOMBS), "healthy"])
def test_a_bomb_is_built_off_the_event_loop(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bomb costs seconds of CPU to build (more on a busy host): built on the loop, it would
    stall every stream beside it past its timeouts, the gateway's live ones included."""
    built_on: list[threading.Thread] = []
    real = wire_upstream.answer

    def answer(name: str) -> bytes:
        built_on.append(threading.current_thread())
        return real("healthy")  # the real bombs' bytes are not what this test is about

    monkeypatch.setattr(wire_upstream, "answer", answer)

    async def main() -> tuple[bytes, threading.Thread]:
        async with WireUpstream() as up:
            head = await _ask(up.port, model)
            return head, threading.current_thread()

    head, loop_thread = asyncio.run(main())
    assert head.startswith(b"HTTP/1.1 200") and len(built_on) == 1
    assert (built_on[0] is not loop_thread) == (model in BOMBS)
