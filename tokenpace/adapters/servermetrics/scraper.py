"""The scraper process: GET a /metrics URL every interval, one JSON line per scrape.

Run apart from the load client so that fetching and parsing (milliseconds of pure Python per
scrape) never delays the client's timestamps. ``time.perf_counter_ns`` is CLOCK_MONOTONIC on
Linux, the same clock in both processes, so scrapes line up with request records.

    python -m tokenpace.adapters.servermetrics.scraper URL INTERVAL_S OUT.jsonl [ROTATE_BYTES]

URL ``nvidia-smi`` reads the local GPUs with that program instead (adapters/servermetrics/nvidia_smi.py).

With ROTATE_BYTES (the gateway, which runs for months), a file past that size is renamed to
OUT.jsonl.1 (replacing the previous one) and a new OUT.jsonl is begun: a reader that holds the
file open finishes it, then follows the name (see gateway/observability/engine_watch.py).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import orjson

from tokenpace.adapters.servermetrics.bounded import ReadBoundError, read_bounded
from tokenpace.adapters.servermetrics.nvidia_smi import NVIDIA_SMI, read_nvidia_smi
from tokenpace.adapters.servermetrics.parse import parse_metrics

AUTH_ENV = "TOKENPACE_SCRAPE_AUTHORIZATION"  # set by ScraperProcess: credentials stay off argv
# An engine's page is tens to hundreds of KiB; a bigger one (200 k series: 13.5 MB seen) is not
# read past this, nor parsed: the scrape is recorded as an error, the scraper's memory stays small.
MAX_PAGE_BYTES = 2 * 1024 * 1024


def scrape_once(url: str, timeout_s: float, auth: str | None = None) -> dict[str, Any]:
    t_ns = time.perf_counter_ns()
    if url == NVIDIA_SMI:  # the local GPUs: a program, run within the same deadline
        try:
            return {"t_ns": t_ns, "samples": read_nvidia_smi(timeout_s)}
        except (OSError, ValueError) as exc:
            return {"t_ns": t_ns, "error": str(exc)[:200]}
    request = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            page = read_bounded(resp, MAX_PAGE_BYTES, time.monotonic() + timeout_s)
        return {"t_ns": t_ns, "samples": parse_metrics(page.decode("utf-8", "replace"))}
    except ReadBoundError as exc:  # over the cap, or slower than the whole read's deadline
        return {"t_ns": t_ns, "error": f"metrics page {exc}"}
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return {"t_ns": t_ns, "error": str(exc)[:200]}


def main(argv: list[str]) -> int:
    url, interval_s, out_path = argv[0], float(argv[1]), argv[2]
    auth = os.environ.pop(AUTH_ENV, None)  # Basic auth from the URL given to the parent
    rotate_bytes = int(argv[3]) if len(argv) > 3 else 0
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    parent = os.getppid()
    timeout_s = max(2.0, interval_s)  # a loaded engine may answer /metrics slowly
    out = open(out_path, "wb")  # noqa: SIM115 (replaced on rotation)
    try:
        next_at = time.monotonic()
        while not stopping:
            line = orjson.dumps(scrape_once(url, timeout_s, auth)) + b"\n"
            if rotate_bytes and len(line) > rotate_bytes // 2:  # one scrape may not fill a file
                line = orjson.dumps({"t_ns": time.perf_counter_ns(), "error": "scrape too large"}) + b"\n"
            if rotate_bytes and out.tell() + len(line) > rotate_bytes:  # rotated before the bound
                out.close()
                os.replace(out_path, out_path + ".1")
                out = open(out_path, "wb")  # noqa: SIM115
            out.write(line)
            out.flush()
            next_at += interval_s
            if next_at < time.monotonic():  # a slow server: keep the cadence, skip what was missed
                next_at = time.monotonic()
            # short naps: a stop (or the parent's death) is noticed within 0.1 s
            while not stopping and time.monotonic() < next_at:
                if os.getppid() != parent:
                    return 0  # the run is gone: never scrape on for ever
                time.sleep(min(0.1, max(0.0, next_at - time.monotonic())))
        out.write(orjson.dumps(scrape_once(url, 2.0, auth)) + b"\n")  # a last one after the load
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
