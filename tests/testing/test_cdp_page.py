"""The Chromium page helper on local files: a page's console errors and uncaught exceptions are
collected, probes read back (JSON decoded), a click waits for the page it opens, and a screenshot
is a PNG of the viewport."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from tokenpace.testing.cdp_page import chromium_path, open_page

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed")

FIRST = """<!DOCTYPE html><html><body data-figures="0"><a id="next" href="second.html">next</a>
<script>console.error("boom"); window.addEventListener("load", () => { throw new Error("late"); });</script>
</body></html>"""
SECOND = '<!DOCTYPE html><html><body data-figures="0"><p id="p">second page</p></body></html>'


def test_a_page_is_opened_read_clicked_and_shot(tmp_path: Path) -> None:
    (tmp_path / "first.html").write_text(FIRST)
    (tmp_path / "second.html").write_text(SECOND)

    async def go() -> tuple[list[Any], Any, Any, list[dict[str, Any]], bytes]:
        async with open_page(640, 480) as page:
            await page.open((tmp_path / "first.html").as_uri())
            errors = [e.get("exceptionDetails", e.get("args", e)) for e in page.problems()]
            probe = await page.read("JSON.stringify({n: document.links.length})")
            await page.click("document.getElementById('next')", "the link")
            second = await page.value("document.getElementById('p').textContent")
            clean = page.problems()
            png = await page.screenshot(tmp_path / "shot.png")
            with pytest.raises(RuntimeError, match="nothing to click"):
                await page.click("document.getElementById('none')", "a missing link")
            return errors, probe, second, clean, png

    errors, probe, second, clean, png = asyncio.run(go())
    assert len(errors) == 2 and "boom" in str(errors) and "late" in str(errors)
    assert probe == {"n": 1} and second == "second page" and clean == []  # events are per page
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (640, 480)
    assert (tmp_path / "shot.png").read_bytes() == png
