"""Pictures of a report's charts, taken in headless Chromium (``cdp_page``).

The same Chromium the report tests use (Debian ``chromium``, from scripts/system-packages.txt). Used by
``make playbook-images`` (scripts/playbook_images.py) to refresh the pictures in docs/img.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenpace.testing.cdp_page import FLAGS, Page, chromium_path, open_page

__all__ = ["FLAGS", "capture_charts", "chromium_path"]

# The rectangle of the figure whose title is TITLE (modebars hidden), in page coordinates.
_FIND = """(() => {
  const fig = [...document.querySelectorAll('div[id^="tp-fig-"]')]
    .find(d => [...d.querySelectorAll('.gtitle')].some(t => t.textContent === TITLE));
  if (!fig) return 'null';
  document.querySelectorAll('.modebar').forEach(m => m.style.display = 'none');
  fig.scrollIntoView();
  const r = fig.getBoundingClientRect();
  return JSON.stringify({x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height});
})()"""


async def _shoot(page: Page, title: str, out: Path, scale: float) -> None:
    rect = await page.read(_FIND.replace("TITLE", json.dumps(title)))
    if rect is None:
        raise RuntimeError(f"no chart titled {title!r}")
    await page.screenshot(out, clip=rect | {"scale": scale})


async def capture_charts(page: Path, charts: dict[str, Path], width: int = 900, scale: float = 0.8) -> None:
    """Save each chart of PAGE titled KEY as the PNG at charts[KEY]."""
    async with open_page(width, 900) as tab:
        await tab.open(page.resolve().as_uri(), settle_s=0)
        for title, out in charts.items():
            await _shoot(tab, title, out, scale)
