"""Starting and stopping the scraper process; finding an endpoint's own /metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from tokenpace.adapters.bounded_read import read_lines
from tokenpace.adapters.servermetrics.bounded import ReadBoundError, read_bounded
from tokenpace.adapters.servermetrics.parse import parse_metrics

# AUTH_ENV: credentials go in the environment, never on argv
from tokenpace.adapters.servermetrics.scraper import AUTH_ENV, MAX_PAGE_BYTES
from tokenpace.core.analysis.diagnosis.gpu_metrics import has_gpu_metrics
from tokenpace.core.credentials import split_credentials, strip_credentials

# The scrapes file read back at the end of a run: a line is one page's parsed samples (a page is at
# most MAX_PAGE_BYTES); a run of 11 days at one scrape a second
MAX_SCRAPE_LINE_BYTES = 4 * MAX_PAGE_BYTES
MAX_SCRAPES_READ = 1_000_000


def metrics_request(url: str, auth: str | None = None) -> urllib.request.Request:
    """A GET of ``url`` (without its user:password, sent as Basic auth instead)."""
    clean, url_auth = split_credentials(url)
    auth = auth or url_auth
    return urllib.request.Request(clean, headers={"Authorization": auth} if auth else {})


def probe_metrics_url(url: str, timeout_s: float = 3.0, auth: str | None = None) -> str | None:
    """None when ``url`` answers with Prometheus text, else why not (naming the URL without its
    credentials)."""
    return _probe(url, timeout_s, auth)[1]


def probe_gpu_url(url: str, timeout_s: float = 3.0) -> str | None:
    """None when ``url`` answers with Prometheus text holding DCGM's GPU fields (a dcgm-exporter,
    or an engine that exports them), else why not."""
    samples, problem = _probe(url, timeout_s, None)
    if problem is None and not has_gpu_metrics(samples or {}):
        return f"{strip_credentials(url)} has no DCGM_FI_DEV_* GPU metrics (is it a dcgm-exporter?)"
    return problem


def _probe(url: str, timeout_s: float, auth: str | None) -> tuple[dict[str, float] | None, str | None]:
    request = metrics_request(url, auth)
    shown = request.full_url
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            # the whole read within the timeout and the scraper's page cap, never the body unbounded
            page = read_bounded(resp, MAX_PAGE_BYTES, time.monotonic() + timeout_s)
    except ReadBoundError as exc:
        return None, f"{shown}: page {exc}"
    except (OSError, ValueError) as exc:
        return None, f"{shown} did not answer: {exc}"
    text = page.decode("utf-8", "replace")
    try:
        samples = parse_metrics(text)
    except ValueError:
        return None, f"{shown} is not Prometheus text"
    return samples, None if samples else f"{shown} has no metrics"


class ScraperProcess:
    def __init__(
        self, url: str, interval_s: float, out_path: Path, auth: str | None = None, rotate_bytes: int = 0
    ) -> None:
        self.url, self.interval_s, self.out_path = url, interval_s, out_path
        self.auth = auth  # an Authorization to send (else the URL's user:password, if any)
        self.rotate_bytes = rotate_bytes  # 0: one file, kept whole (bench keeps every scrape)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        url, url_auth = split_credentials(self.url)
        auth = self.auth or url_auth
        env = {k: v for k, v in os.environ.items() if k != AUTH_ENV}
        if auth:
            env[AUTH_ENV] = auth
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenpace.adapters.servermetrics.scraper",
                url,
                str(self.interval_s),
                str(self.out_path),
                *([str(self.rotate_bytes)] if self.rotate_bytes else []),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_first_scrape(self, timeout_s: float = 10.0) -> bool:
        """Block until the first scrape is written: the baseline must come before any load."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.out_path.exists() and self.out_path.stat().st_size > 0:
                return True
            if self.proc is None or self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def terminate(self) -> None:
        """Tells the scraper to stop (it finishes the scrape in hand); ``stop`` waits for it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def stop(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Stop (after one last scrape, killed past ``timeout_s``) and return every scrape, oldest first."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if not self.out_path.exists():
            return []
        scrapes = []
        lines = read_lines(self.out_path, MAX_SCRAPE_LINE_BYTES, "a scrape line", MAX_SCRAPES_READ)
        for _, line in lines:
            try:
                scrapes.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                break  # a line cut by the stop
        return scrapes
