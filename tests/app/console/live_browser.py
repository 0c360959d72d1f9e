"""A console page followed in headless Chromium until a condition holds (a live run's page until
its run ended): the page opened, ``until`` polled (bounded by a generous deadline, not timed),
then ``probe`` read, with every console error and request it caused (``app.console.browser``)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from typing import Any

import aiohttp

from app.console.browser import Cdp, problems
from tokenpace.testing.chromium import FLAGS, chromium_path


async def follow(url: str, until: str, probe: str, deadline_s: float = 120.0) -> dict[str, Any]:
    profile = tempfile.mkdtemp(prefix="tp-chromium-")
    proc = await asyncio.create_subprocess_exec(
        str(chromium_path()), *FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
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
            attached = await cdp.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
            sid = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                await cdp.call(f"{domain}.enable", sid)
            await cdp.call("Page.navigate", sid, url=url)
            loop = asyncio.get_running_loop()
            end = loop.time() + deadline_s
            while not await cdp.value(sid, until):
                if loop.time() > end:
                    raise RuntimeError(f"{url}: {until} did not hold by the deadline")
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)  # late errors, if any, arrive as events
            value = await cdp.value(sid, probe)
            events = list(cdp.events)
            await cdp.call("Browser.close")
            cdp.reader.cancel()
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return {
        "value": json.loads(value) if isinstance(value, str) else value,
        "errors": problems(events),
        "requests": [
            e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"
        ],
    }
