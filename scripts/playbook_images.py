"""Refresh the pictures of docs/playbook.md: step 2's report charts and step 3's web console.

Run by ``make playbook-images``, on the simulator, with the playbook's own commands at small counts:
a concurrency sweep and its ``tokenpace report --html`` (each chart captured); then a store like
step 3's (a baseline of repeated runs, ten nightly runs, the last five 8 % slower), ``tokenpace ui``
over it on a free 127.0.0.1 port, and its pages in headless Chromium at one viewport size: the runs
page, a click on a nightly run's "history" (the P95 TTFT shift said in one line), a click on
"compare with previous" at the shift, the shifted run, and a run in progress on its live page.
Seeds, counts and the viewport are fixed; the timings (and so the figures) are real, so they move.

    python scripts/playbook_images.py [OUT_DIR] [--quick]    (--quick: a shorter sweep, for the test)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenpace.testing.cdp_page import FIGURES_DRAWN, Page, open_page
from tokenpace.testing.chromium import capture_charts
from tokenpace.testing.procs import FINISHED, cli_command, free_port

CHARTS = {
    "TTFT vs load": "playbook-ttft-vs-load.png",
    "Throughput and goodput per step": "playbook-throughput-vs-load.png",
}
CONSOLE = {
    "runs": "playbook-console-runs.png",
    "history": "playbook-console-history.png",
    "compare": "playbook-console-compare.png",
    "run": "playbook-console-run.png",
    "live": "playbook-console-live.png",
}
VIEWPORT = (1200, 720)  # css px at scale 1: each console picture is exactly this size
LIMIT_BYTES = 150_000
NIGHTLY = ["--concurrency", "1", "--requests", "10", "--input-len", "2048", "--output-len", "4"]
SLOWER = ["--cold-start", "1000000", "--cold-start-factor", "1.3"]  # every step 30 % slower

# The "history" link of the newest run labelled nightly=8b, on the runs page.
NIGHTLY_HISTORY = """[...document.querySelectorAll('#runs tbody tr')]
  .find(tr => tr.innerText.includes('nightly=8b')).querySelector('a[href^="/history"]')"""
# The "compare with previous" link on the history row of run RUN.
COMPARE_AT = """[...document.querySelectorAll('table.history tbody tr')]
  .find(tr => tr.cells[0].innerText.trim() === RUN).querySelector('a[href^="/compare"]')"""
LIVE_SEEN = "+document.getElementById('tp-live').dataset.updates >= 8"  # a few points drawn
NO_MODEBARS = "document.querySelectorAll('.modebar').forEach(m => m.style.display = 'none')"


def wait_answering(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(600):  # a Python process's start-up on a busy host (bounded, not timed)
        if proc.poll() is not None:
            raise SystemExit(f"{' '.join(map(str, proc.args))} exited {proc.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1):
            return
        time.sleep(0.1)
    raise SystemExit(f"nothing answered at {url}")


@contextlib.contextmanager
def service(args: list[str], probe: str) -> Iterator[None]:
    """``tokenpace ARGS`` (a simulator, the console) up until the block ends."""
    proc = subprocess.Popen(cli_command(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_answering(probe, proc)
        yield
    finally:
        proc.terminate()
        proc.wait()


def sim(port: int, *extra: str) -> contextlib.AbstractContextManager[None]:
    args = ["sim", "--port", str(port), "--max-num-seqs", "4", *extra]
    return service(args, f"http://127.0.0.1:{port}/health")


def tokenpace(*args: str, cwd: Path) -> int:
    done = subprocess.run(cli_command(*args), cwd=cwd, stdout=subprocess.DEVNULL)
    if done.returncode not in FINISHED:  # 3: NOT VALID (a busy host's client fell behind), still drawn
        raise SystemExit(f"tokenpace {args[0]} failed (exit {done.returncode})")
    return done.returncode


def make_report(work: Path, url: str, quick: bool) -> Path:
    steps, requests = ("1,2,4", "24") if quick else ("1,2,4,8,16", "60")
    sweep = ["sweep", "--url", url, "--concurrency", steps, "--requests", requests]
    sweep += ["--input-len", "512", "--output-len", "8", "--seed", "7", "--slo", "ttft=300ms,tpot=30ms"]
    tokenpace(*sweep, "--no-store", "--out", "sweep.json", "-q", cwd=work)
    tokenpace("report", "sweep.json", "--html", "report.html", cwd=work)
    return work / "report.html"


def nightly(url: str, store: str, work: Path, keep_not_valid: bool) -> None:
    """Five valid nightly runs; a NOT VALID one is measured again, and kept (marked on the history)
    or dropped: after the slowdown, so that the run before the shift is a valid one to compare."""
    valid = 0
    for _ in range(15):
        args = ("bench", "--url", url, *NIGHTLY, "--label", "nightly=8b", "--store", store)
        if tokenpace(*args, "--out", "night.json", "-q", cwd=work) == 0:
            valid += 1
        elif not keep_not_valid:
            run_id = json.loads((work / "night.json").read_text())["run_id"]
            tokenpace("runs", "delete", run_id, "--yes", "--store", store, cwd=work)
        if valid == 5:
            return
    raise SystemExit("the nightly bench came out NOT VALID 10 times: the host is too busy")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


async def shoot(page: Page, out: Path) -> None:
    await page.value(NO_MODEBARS)
    await page.screenshot(out)


async def shoot_console(origin: str, out: Path, live: list[str]) -> dict[str, Any]:
    """The console's pictures, reached as a newcomer would: from the runs page, one click to the
    shift, one more to what changed. Returns the clicks made and the history's headline."""
    clicks = 0
    async with open_page(*VIEWPORT) as page:
        await page.open(f"{origin}/runs")
        await shoot(page, out / CONSOLE["runs"])
        await page.click(NIGHTLY_HISTORY, "history of a nightly run")
        clicks += 1
        headline = str(await page.value("document.querySelector('.headline').innerText"))
        found = re.search(r"P95 TTFT shifted \S+ .* \(run (\w+)\)", headline)
        if found is None:
            raise SystemExit(f"the history shows no P95 TTFT shift: {headline!r}")
        await shoot(page, out / CONSOLE["history"])
        await page.click(COMPARE_AT.replace("RUN", json.dumps(found.group(1))), "compare at the shift")
        clicks += 1
        if not await page.value("document.body.innerText.includes('Each percentile')"):
            raise SystemExit(f"the compare page compared nothing: {await page.value('location.href')}")
        await shoot(page, out / CONSOLE["compare"])
        errors = page.problems()
        await page.open(f"{origin}/runs/{found.group(1)}")
        await shoot(page, out / CONSOLE["run"])
        bench = subprocess.Popen(cli_command(*live), stdout=subprocess.DEVNULL)
        try:
            for _ in range(600):  # until the run has published (bounded, not timed)
                running = get_json(f"{origin}/api/live")["running"]
                if running or bench.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            if not running:
                raise SystemExit("the live bench never showed on /live")
            await page.open(f"{origin}/live/{running[0]['run_id']}", ready=f"{FIGURES_DRAWN} && {LIVE_SEEN}")
            await shoot(page, out / CONSOLE["live"])
        finally:
            bench.wait()
        errors += page.problems()
    return {"clicks": clicks, "headline": headline, "errors": errors}


def console_pictures(work: Path, out: Path, sim_port: int) -> dict[str, Any]:
    """Step 3's store on the slower simulator's port (the caller holds it up), then the console."""
    store = f"sqlite:///{work / 'runs.db'}"
    url = f"http://127.0.0.1:{sim_port}/v1"
    ui_port = free_port()
    origin = f"http://127.0.0.1:{ui_port}"
    live = ["bench", "--url", url, "--concurrency", "2", "--duration", "8", "--input-len", "512"]
    live += ["--output-len", "8", "--label", "canary=live", "--store", store, "-q"]
    with service(["ui", "--store", store, "--listen", f"127.0.0.1:{ui_port}"], f"{origin}/api/runs"):
        return asyncio.run(shoot_console(origin, out, live))


def build(out: Path, quick: bool = False) -> dict[str, Any]:
    """Every picture into OUT; returns what the console walk saw (clicks, headline, errors)."""
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="tp-playbook-") as tmp:
        work = Path(tmp)
        store = f"sqlite:///{work / 'runs.db'}"
        with sim(port):
            page = make_report(work, url, quick)
            baseline = ["bench", "--url", url, "--concurrency", "4", "--requests", "40", "--input-len", "512"]
            baseline += ["--output-len", "8", "--seed", "7", "--repeat", "3", "--label", "version=1.0"]
            tokenpace(*baseline, "--store", store, "-q", cwd=work)
            tokenpace("baseline", "set", "release-1.0", "version=1.0", "--store", store, cwd=work)
            nightly(url, store, work, keep_not_valid=True)
        asyncio.run(capture_charts(page, {title: out / name for title, name in CHARTS.items()}))
        with sim(port, *SLOWER):
            nightly(url, store, work, keep_not_valid=False)
            walk = console_pictures(work, out, port)
    if walk["errors"]:
        raise SystemExit(f"the console's pages logged errors: {walk['errors']}")
    return walk


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    out = Path(next((a for a in argv if not a.startswith("--")), "docs/img"))
    walk = build(out, quick)
    print(f"{walk['clicks']} clicks from the runs page: {walk['headline']}")
    for name in [*CHARTS.values(), *CONSOLE.values()]:
        size = (out / name).stat().st_size
        print(f"{out / name}: {size:,} bytes")
        if size > LIMIT_BYTES:
            raise SystemExit(f"{out / name} is over {LIMIT_BYTES:,} bytes: lower the scale")


if __name__ == "__main__":
    main(sys.argv[1:])
