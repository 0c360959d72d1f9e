"""Console pages in a real headless Chromium (tokenpace/testing/cdp_page.py): a page opened, its
charts waited for, an expression read back, and every console error, uncaught exception, CSP
violation and network request it caused collected."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tokenpace.testing.cdp_page import Page, chromium_path, open_page
from tokenpace.testing.procs import SETUP_NICE

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="chromium is not installed (make test installs it: scripts/system-packages.txt)",
)


async def _read(page: Page, probe: str) -> dict[str, Any]:
    return {"value": await page.read(probe), "errors": page.problems(), "requests": page.requests()}


async def visit(urls: list[str], probe: str) -> list[dict]:
    """Open each URL in turn; for each: ``value`` (``probe`` evaluated once its charts drew),
    ``errors`` and ``requests`` (URLs fetched)."""
    async with open_page() as page:
        results = []
        for url in urls:
            await page.open(url)
            results.append(await _read(page, probe))
        return results


async def follow(
    start: Callable[[], Awaitable[str]], until: str, probe: str, deadline_s: float = 120.0
) -> dict[str, Any]:
    """A page followed until ``until`` holds (a live run's page until its run ended: bounded by a
    generous deadline, not timed), then ``probe`` read, with its errors and requests. The browser is
    up before ``start`` (which starts the run and gives its page's URL), so the page watches the run
    from its start, not from whenever a busy host finished starting Chromium."""
    async with open_page(nice=SETUP_NICE) as page:
        url = await start()
        await page.call("Page.navigate", url=url)
        await page.wait_for(until, url, tries=int(deadline_s / 0.1), pause_s=0.1)
        await asyncio.sleep(0.3)  # late errors, if any, arrive as events
        return await _read(page, probe)
