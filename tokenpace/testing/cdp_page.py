"""One page in headless Chromium, driven over the DevTools protocol (CDP, aiohttp's websocket client).

What the browser tests and ``make playbook-images`` share: Chromium started with a throwaway profile,
a page opened and waited for until its figures drew, expressions read back, screenshots, and every
console error, uncaught exception and network request the page caused. The browser is Debian
``chromium`` (scripts/system-packages.txt), the one ``make test`` installs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp

from tokenpace.testing.procs import renice

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--hide-scrollbars",
)  # fmt: skip
CALL_TIMEOUT_S = 60.0  # one CDP answer, and Chromium's start (a hung browser fails, never hangs)

# Every plotly figure the page declares (<body data-figures>) has drawn its axes: the console counts
# its own on <body data-drawn>; the offline reports are counted here.
FIGURES_DRAWN = """(() => {
  const want = +(document.body.dataset.figures || 0);
  if (!want) return true;
  const axes = [...document.querySelectorAll('div[id^="tp-fig-"]')]
    .filter(d => d.querySelector('.main-svg .cartesianlayer')).length;
  return Math.max(axes, +(document.body.dataset.drawn || 0)) >= want;
})()"""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """A browser tab: ``call`` sends a CDP command to it; events (console, log, network) pile up in
    ``events`` until ``clear`` (done by ``open`` and ``click``: one page's events at a time)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse[bool]) -> None:
        self.ws, self.n, self.session = ws, 0, ""
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
            else:
                self.events.append(data)

    async def call(self, method: str, *, browser: bool = False, **params: Any) -> dict[str, Any]:
        """A command to this tab (``browser=True``: to the browser itself)."""
        self.n += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.n] = fut
        msg: dict[str, Any] = {"id": self.n, "method": method, "params": params}
        if self.session and not browser:
            msg["sessionId"] = self.session
        await self.ws.send_str(json.dumps(msg))
        data = await asyncio.wait_for(fut, CALL_TIMEOUT_S)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return dict(data.get("result", {}))

    async def value(self, expression: str) -> Any:
        """The expression's value (what JSON can carry)."""
        res = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return res.get("result", {}).get("value")

    async def read(self, expression: str) -> Any:
        """A probe's value, a JSON text (``JSON.stringify(...)``) decoded."""
        value = await self.value(expression)
        return json.loads(value) if isinstance(value, str) else value

    async def wait_for(self, expression: str, what: str, tries: int = 600, pause_s: float = 0.05) -> None:
        """Poll until the expression is truthy (bounded by tries, not timed)."""
        for _ in range(tries):
            if await self.value(expression):
                return
            await asyncio.sleep(pause_s)
        raise RuntimeError(f"{what}: {expression[:80]!r} did not hold")

    async def open(self, url: str, ready: str = FIGURES_DRAWN, settle_s: float = 0.3) -> None:
        """Navigate, wait until the document loaded and ``ready`` holds, then a moment for late
        errors to arrive as events (the events of the page before are dropped)."""
        self.clear()
        await self.call("Page.navigate", url=url)
        await self.wait_for(f"document.readyState === 'complete' && ({ready})", url)
        await asyncio.sleep(settle_s)

    async def click(self, element: str, what: str, ready: str = FIGURES_DRAWN) -> None:
        """Click the element the expression ``element`` names (a link) and wait for the page it opens
        (its events only)."""
        before = await self.value("location.href")
        self.clear()
        clicked = await self.value(f"(() => {{ const el = {element}; if (el) el.click(); return !!el; }})()")
        if not clicked:
            raise RuntimeError(f"{what}: nothing to click on {before}")
        changed = f"location.href !== {json.dumps(before)} && document.readyState === 'complete'"
        await self.wait_for(f"{changed} && ({ready})", what)

    async def screenshot(self, out: Path, clip: dict[str, float] | None = None) -> bytes:
        """A PNG of the viewport (or of ``clip``, in page coordinates), written to ``out``."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params |= {"clip": clip, "captureBeyondViewport": True}
        png = base64.b64decode((await self.call("Page.captureScreenshot", **params))["data"])
        out.write_bytes(png)
        return png

    def clear(self) -> None:
        self.events.clear()

    def problems(self) -> list[dict[str, Any]]:
        """Uncaught exceptions, console errors and assertions, and log errors (CSP included)."""
        out = [e["params"] for e in self.events if e["method"] == "Runtime.exceptionThrown"]
        out += [
            e["params"]
            for e in self.events
            if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")
        ]
        out += [
            e["params"]
            for e in self.events
            if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
        ]
        return out

    def requests(self) -> list[str]:
        """Every URL the page fetched since ``clear``."""
        return [
            e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"
        ]


async def _devtools_url(proc: asyncio.subprocess.Process) -> str:
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), CALL_TIMEOUT_S)).decode(errors="replace")
        if not line:
            raise RuntimeError("chromium exited before DevTools listened")
        if "DevTools listening on " in line:
            return line.split("DevTools listening on ", 1)[1].strip()


@asynccontextmanager
async def open_page(width: int = 1400, height: int = 1000, nice: int = 0) -> AsyncIterator[Page]:
    """A fresh Chromium (its own throwaway profile) with one tab of WIDTH x HEIGHT css px at scale 1,
    its console, log, page and network events on; the browser is closed and removed on exit.
    ``nice``: added to the browser's niceness where the host allows it (lower: ahead of others)."""
    chromium = chromium_path()
    if chromium is None:
        raise RuntimeError("chromium is not installed (scripts/system-packages.txt)")
    profile = tempfile.mkdtemp(prefix="tp-chromium-")
    proc = await asyncio.create_subprocess_exec(
        chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        preexec_fn=(lambda: renice(nice)) if nice else None,
    )  # fmt: skip
    drain = None
    try:
        ws_url = await _devtools_url(proc)
        assert proc.stderr is not None
        drain = asyncio.get_running_loop().create_task(proc.stderr.read())  # a full pipe stalls chromium
        async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
            page = Page(ws)
            target = await page.call("Target.createTarget", url="about:blank")
            attached = await page.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
            page.session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                await page.call(f"{domain}.enable")
            await page.call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            try:
                yield page
            finally:
                with suppress(RuntimeError, ConnectionError, asyncio.TimeoutError):
                    await page.call("Browser.close", browser=True)
                page.reader.cancel()
    finally:
        if drain is not None:
            drain.cancel()
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
