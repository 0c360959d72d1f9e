"""/metrics renders in a thread and holds the GIL while it does: a slow render is served again for a
while (its work a second bounded whatever the scrape rate), scrapes that meet share one render,
and a fast render (a small registry) is never reused, so a scrape always sees the counts."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tokenpace.gateway.operations import admin
from tokenpace.gateway.operations.admin import RenderedPages


class Renders:
    def __init__(self, cpu_s: float) -> None:
        self.cpu_s = cpu_s
        self.threads: list[int] = []

    def __call__(self) -> bytes:
        self.threads.append(threading.get_ident())
        t0 = time.thread_time()
        while time.thread_time() - t0 < self.cpu_s:  # CPU, as a big registry's render takes
            pass
        return b"page %d" % len(self.threads)


def test_a_slow_render_is_served_again_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin, "REST", 100_000)  # the rest never ends inside this test
    render = Renders(cpu_s=2 * admin.MIN_RENDER_S)

    async def main() -> list[bytes]:
        pages = RenderedPages()
        met = await asyncio.gather(*(pages.get("text/plain", render) for _ in range(3)))
        return [
            *met,
            await pages.get("text/plain", render),
            await pages.get("application/openmetrics", render),
        ]

    got = asyncio.run(main())
    assert got == [b"page 1"] * 4 + [b"page 2"]  # one render for four scrapes; a type of its own
    assert threading.get_ident() not in render.threads  # rendered off the loop's thread


def test_a_fast_render_is_never_reused() -> None:
    render = Renders(cpu_s=0.0)

    async def main() -> list[bytes]:
        pages = RenderedPages()
        return [await pages.get("text/plain", render) for _ in range(3)]

    assert asyncio.run(main()) == [b"page 1", b"page 2", b"page 3"]


def test_a_failed_render_reaches_every_scrape_and_is_not_kept() -> None:
    def broken() -> bytes:
        raise ValueError("collector failed")

    async def main() -> bytes:
        pages = RenderedPages()
        results = await asyncio.gather(pages.get("t", broken), pages.get("t", broken), return_exceptions=True)
        assert all(isinstance(r, ValueError) for r in results)
        return await pages.get("t", lambda: b"fine")

    assert asyncio.run(main()) == b"fine"
