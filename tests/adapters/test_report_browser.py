"""The HTML report in a real headless Chromium: every chart renders, nothing errors, nothing is fetched,
no table runs off the page and no legend covers an axis label.

Talks to Chromium over the DevTools protocol (aiohttp's websocket client) to read console errors,
uncaught exceptions and network requests, and saves a screenshot of the whole page.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import tempfile
from pathlib import Path

import aiohttp
import pytest

from tokenpace.adapters.report.figures import make_steps
from tokenpace.adapters.report.html import render_html
from tokenpace.app.bench.bench import BenchConfig
from tokenpace.app.sweep.sweep import Sweep, SweepConfig
from tokenpace.core.metrics import Slo
from tokenpace.core.workload.lengths import parse_length
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test installs it: scripts/system-packages.txt)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
]


# At the page's width: how far the page and each table reach past the body (px), and the charts
# whose legend covers one of their own axis labels or titles.
LAYOUT_PROBE = """(() => {
  const body = document.body.getBoundingClientRect();
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const covered = [];
  for (const fig of document.querySelectorAll('div[id^="tp-fig-"]')) {
    const legend = fig.querySelector('.legend .bg');
    if (!legend) continue;
    const box = legend.getBoundingClientRect();
    const names = '.xtick text, .ytick text, .y2tick text, .xtitle, .ytitle, .y2title';
    const labels = [...fig.querySelectorAll(names)]
      .map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
    if (labels.some(r => hit(r, box))) covered.push(fig.querySelector('.gtitle').textContent);
  }
  return JSON.stringify({
    page_past: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    tables_past: [...document.querySelectorAll('table')]
      .map(t => Math.round(t.getBoundingClientRect().right - body.right)),
    legend_covers_labels: covered,
  });
})()"""


class Cdp:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.n = 0
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

    async def call(self, method: str, session: str | None = None, **params) -> dict:
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


async def open_in_chromium(page: Path, screenshot: Path, width: int = 1400, extra: str | None = None) -> dict:
    """``extra``: a JavaScript expression (JSON text) read once the figures drew: ``out["extra"]``."""
    profile = tempfile.mkdtemp(prefix="tp-chromium-")
    proc = await asyncio.create_subprocess_exec(
        str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        ws_url = None
        while ws_url is None:
            assert proc.stderr is not None
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            if not line:
                raise RuntimeError("chromium exited before DevTools listened")
            text = line.decode(errors="replace")
            if "DevTools listening on " in text:
                ws_url = text.split("DevTools listening on ", 1)[1].strip()
        drain = asyncio.get_running_loop().create_task(proc.stderr.read())  # type: ignore[union-attr]
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
                width=width,
                height=1000,
                deviceScaleFactor=1,
                mobile=False,
            )
            await cdp.call("Page.navigate", sid, url=page.as_uri())
            probe = (
                "JSON.stringify({want: +document.body.dataset.figures,"
                " got: [...document.querySelectorAll('div[id^=\"tp-fig-\"]')]"
                ".filter(d => d.querySelector('.main-svg .cartesianlayer')).length,"
                " traces: document.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,"
                " titles: [...document.querySelectorAll('.gtitle')].map(t => t.textContent)})"
            )
            state: dict = {}
            for _ in range(300):  # until every figure has drawn its axes (bounded, not timed)
                res = await cdp.call("Runtime.evaluate", sid, expression=probe, returnByValue=True)
                value = res.get("result", {}).get("value")
                state = json.loads(value) if value else {}
                if state.get("want") and state["got"] == state["want"]:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)  # late errors, if any, arrive as events
            res = await cdp.call("Runtime.evaluate", sid, expression=LAYOUT_PROBE, returnByValue=True)
            state["layout"] = json.loads(res["result"]["value"])
            if extra is not None:
                res = await cdp.call("Runtime.evaluate", sid, expression=extra, returnByValue=True)
                state["extra"] = json.loads(res.get("result", {}).get("value") or "null")
            shot = await cdp.call("Page.captureScreenshot", sid, format="png", captureBeyondViewport=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            events = list(cdp.events)
            await cdp.call("Browser.close")
            cdp.reader.cancel()
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    errors = [e["params"] for e in events if e["method"] == "Runtime.exceptionThrown"]
    errors += [
        e["params"]
        for e in events
        if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")
    ]
    errors += [
        e["params"]
        for e in events
        if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
    ]
    requests = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    return {"state": state, "errors": errors, "requests": requests}


async def make_report(path: Path) -> None:
    failing = Script(ttft_s=0.01, itl_s=0.002, cut_after=2)
    async with ScriptedServer(Script(ttft_s=0.01, itl_s=0.002), scripts={"cut": failing}) as srv:
        base = BenchConfig(
            url=srv.url, model="m", input_len=parse_length("8:64"), output_len=parse_length("6"),
            requests=10, warmup=1, timeout_s=5.0, slo=Slo(ttft_ms=300),
        )  # fmt: skip
        result = await Sweep(SweepConfig(base=base, mode="concurrency", steps=[1, 2, 4], peak_rps=50)).run()
        doc = result.to_dict()
        cut = await Sweep(SweepConfig(base=BenchConfig(**{**base.__dict__, "model": "cut"}), steps=[2])).run()
    curve = [s for s in result.steps if s.phase == "step" and not s.superseded]  # the revisit is off it
    steps = make_steps(doc["steps"], [s.result.records for s in curve])
    # one step with interrupted streams, so the errors chart has bars
    steps[-1].records.extend(cut.steps[0].result.records)
    path.write_text(render_html(doc, steps), encoding="utf-8")


def test_report_renders_in_chromium_without_errors_or_network(tmp_path):
    page = tmp_path / "report.html"
    asyncio.run(make_report(page))
    shot = tmp_path / "report.png"
    out = asyncio.run(open_in_chromium(page, shot))
    state = out["state"]
    assert state["want"] == 13 and state["got"] == 13, state
    assert state["traces"] >= 20, state
    assert "TTFT vs load" in state["titles"] and "Errors by kind over time" in state["titles"]
    assert out["errors"] == [], out["errors"]
    assert all(u.startswith(("file:", "data:", "about:")) for u in out["requests"]), out["requests"]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    print(f"screenshot: {shot}")
    layout = state["layout"]
    # at 1,400 px every table fits the page (the steps table too), and no legend covers an axis label
    assert layout["page_past"] <= 0 and max(layout["tables_past"]) <= 0, layout
    assert layout["legend_covers_labels"] == [], layout
    # narrower than the steps table: it scrolls in its own box, the page does not
    narrow = asyncio.run(open_in_chromium(page, tmp_path / "narrow.png", width=900))["state"]["layout"]
    assert narrow["page_past"] <= 0 and max(narrow["tables_past"]) > 0, narrow
