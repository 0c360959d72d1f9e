"""Pictures of a report's charts, taken in headless Chromium over the DevTools protocol.

The same Chromium the report tests use (Debian ``chromium``, from scripts/system-packages.txt). Used by
``make playbook-images`` (scripts/playbook_images.py) to refresh the pictures in docs/img.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--hide-scrollbars",
)  # fmt: skip

# The rectangle of the figure whose title is TITLE, once every figure has drawn its axes.
_FIND = """(() => {
  const figs = [...document.querySelectorAll('div[id^="tp-fig-"]')];
  if (!figs.length || figs.some(d => !d.querySelector('.main-svg .cartesianlayer'))) return null;
  const fig = figs.find(d => [...d.querySelectorAll('.gtitle')].some(t => t.textContent === TITLE));
  if (!fig) return 'missing';
  document.querySelectorAll('.modebar').forEach(m => m.style.display = 'none');
  fig.scrollIntoView();
  const r = fig.getBoundingClientRect();
  return JSON.stringify({x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height});
})()"""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Cdp:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse[bool], session: str = "") -> None:
        self.ws, self.session, self.ids = ws, session, itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        await self.ws.send_str(json.dumps(msg))
        while True:  # events in between are not needed here
            data = json.loads((await asyncio.wait_for(self.ws.receive(), 60)).data)
            if data.get("id") == msg_id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return dict(data.get("result", {}))


async def _devtools_url(proc: asyncio.subprocess.Process) -> str:
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode(errors="replace")
        if not line:
            raise RuntimeError("chromium exited before DevTools listened")
        if "DevTools listening on " in line:
            return line.split("DevTools listening on ", 1)[1].strip()


async def _shoot(cdp: _Cdp, title: str, out: Path, scale: float) -> None:
    expression = _FIND.replace("TITLE", json.dumps(title))
    for _ in range(300):  # until the charts have drawn (bounded, not timed)
        res = await cdp.call("Runtime.evaluate", expression=expression, returnByValue=True)
        value = res.get("result", {}).get("value")
        if value == "missing":
            raise RuntimeError(f"no chart titled {title!r}")
        if value:
            break
        await asyncio.sleep(0.1)
    else:
        raise RuntimeError("the charts did not draw")
    clip = json.loads(value) | {"scale": scale}
    shot = await cdp.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
    out.write_bytes(base64.b64decode(shot["data"]))


async def capture_charts(page: Path, charts: dict[str, Path], width: int = 900, scale: float = 0.8) -> None:
    """Save each chart of PAGE titled KEY as the PNG at charts[KEY]."""
    chromium = chromium_path()
    if chromium is None:
        raise RuntimeError("chromium is not installed (scripts/system-packages.txt)")
    profile = tempfile.mkdtemp(prefix="tp-chromium-")
    proc = await asyncio.create_subprocess_exec(
        chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        ws_url = await _devtools_url(proc)
        async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
            browser = _Cdp(ws)
            target = await browser.call("Target.createTarget", url="about:blank")
            attached = await browser.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
            cdp = _Cdp(ws, attached["sessionId"])
            viewport = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
            await cdp.call("Emulation.setDeviceMetricsOverride", **viewport)
            await cdp.call("Page.navigate", url=page.resolve().as_uri())
            for title, out in charts.items():
                await _shoot(cdp, title, out, scale)
            await browser.call("Browser.close")
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
