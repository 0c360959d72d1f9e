"""Console pages in a real headless Chromium (tokenpace/testing/chromium.py): a page opened, its
charts waited for, an expression read back, and every console error, uncaught exception, CSP
violation and network request it caused collected."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from typing import Any

import aiohttp
import pytest

from tokenpace.testing.chromium import FLAGS, chromium_path

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="chromium is not installed (make test installs it: scripts/system-packages.txt)",
)

# Every chart div drawn by plotly (the console's script counts them on <body data-drawn>).
READY = (
    "(() => { const want = +document.body.dataset.figures;"
    " return want === 0 || +(document.body.dataset.drawn || 0) === want; })()"
)


class Cdp:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.n = ws, 0
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict] = []
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

    async def call(self, method: str, session: str | None = None, **params: Any) -> dict:
        self.n += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.n] = fut
        msg: dict = {"id": self.n, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send_str(json.dumps(msg))
        data = await asyncio.wait_for(fut, 60)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})

    async def value(self, session: str, expression: str) -> Any:
        res = await self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return res.get("result", {}).get("value")


def problems(events: list[dict]) -> list[dict]:
    out = [e["params"] for e in events if e["method"] == "Runtime.exceptionThrown"]
    out += [
        e["params"]
        for e in events
        if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")
    ]
    out += [
        e["params"]
        for e in events
        if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
    ]
    return out


async def visit(urls: list[str], probe: str) -> list[dict]:
    """Open each URL in turn; for each: ``value`` (``probe`` evaluated once its charts drew),
    ``errors`` and ``requests`` (URLs fetched)."""
    profile = tempfile.mkdtemp(prefix="tp-chromium-")
    proc = await asyncio.create_subprocess_exec(
        str(chromium_path()), *FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    results = []
    try:
        assert proc.stderr is not None
        ws_url = None
        while ws_url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode(errors="replace")
            if not line:
                raise RuntimeError("chromium exited before DevTools listened")
            if "DevTools listening on " in line:
                ws_url = line.split("DevTools listening on ", 1)[1].strip()
        drain = asyncio.get_running_loop().create_task(proc.stderr.read())
        async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
            cdp = Cdp(ws)  # type: ignore[arg-type]
            target = await cdp.call("Target.createTarget", url="about:blank")
            sid = (await cdp.call("Target.attachToTarget", targetId=target["targetId"], flatten=True))[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Page", "Network"):
                await cdp.call(f"{domain}.enable", sid)
            await cdp.call(
                "Emulation.setDeviceMetricsOverride",
                sid,
                width=1400,
                height=1000,
                deviceScaleFactor=1,
                mobile=False,
            )
            for url in urls:
                cdp.events.clear()
                await cdp.call("Page.navigate", sid, url=url)
                for _ in range(600):  # until the page and its charts are drawn (bounded, not timed)
                    if await cdp.value(sid, "document.readyState") == "complete" and await cdp.value(
                        sid, READY
                    ):
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise RuntimeError(f"{url}: the charts did not draw")
                await asyncio.sleep(0.3)  # late errors, if any, arrive as events
                value = await cdp.value(sid, probe)
                events = list(cdp.events)
                results.append(
                    {
                        "value": json.loads(value) if isinstance(value, str) else value,
                        "errors": problems(events),
                        "requests": [
                            e["params"]["request"]["url"]
                            for e in events
                            if e["method"] == "Network.requestWillBeSent"
                        ],
                    }
                )
            await cdp.call("Browser.close")
            cdp.reader.cancel()
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return results
