"""What watches a run besides the client: the engine's /metrics, the GPUs and TCP connect probes."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from tokenpace.adapters.servermetrics import ScraperProcess, probe_metrics_url
from tokenpace.app.watch.gpu_watch import GpuWatch, gpu_scrape_path, gpu_source_for
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.app.watch.probe import ConnectProbe
from tokenpace.core.analysis.diagnosis.engine_metrics import analyse
from tokenpace.core.analysis.diagnosis.gpu_metrics import steady_readings
from tokenpace.core.analysis.evidence.window_mean import window_mean
from tokenpace.core.credentials import strip_credentials
from tokenpace.core.record import RequestRecord
from tokenpace.core.steady import SteadyState
from tokenpace.wire.endpoint import Endpoint


async def metrics_url_for(endpoint: Endpoint, setting: str) -> tuple[str | None, str]:
    """The /metrics URL to scrape and why: "auto" tries the endpoint's own, quietly; a URL given
    explicitly must answer, or the run is refused before any load."""
    if setting == "off":
        return None, "off"
    url = f"{endpoint.scheme}://{endpoint.host_header}/metrics" if setting == "auto" else setting
    problem = await asyncio.to_thread(probe_metrics_url, url)  # blocking I/O off the loop
    if setting == "auto":
        return (None, f"auto: none ({problem})") if problem else (url, "auto")
    if problem:
        raise PreflightError(f"--server-metrics: {problem}")
    return setting, "given"


class RunObservers:
    """Build with ``await RunObservers.create(...)``."""

    @classmethod
    async def create(
        cls,
        endpoint: Endpoint,
        metrics_setting: str,
        interval_s: float,
        connect_probe: bool,
        scrape_path: Path | None = None,
        gpu_setting: str = "off",
    ) -> RunObservers:
        url, source = await metrics_url_for(endpoint, metrics_setting)
        observers = cls(endpoint, url, source, interval_s, connect_probe, scrape_path)
        gpu_url, gpu_source = await gpu_source_for(endpoint, gpu_setting, url)
        observers.gpu_source = gpu_source
        if gpu_url is not None:
            shared = gpu_url == url  # the engine's page carries DCGM's fields: its scrapes serve both
            path = observers.scrape_path or observers.temp_path("gpu-scrapes.jsonl")
            gpu_path = gpu_scrape_path(path) if path == observers.scrape_path else path
            observers.gpu = GpuWatch(gpu_url, gpu_source, interval_s, gpu_path, shared)
        return observers

    def __init__(
        self,
        endpoint: Endpoint,
        metrics_url: str | None,
        metrics_source: str,
        interval_s: float,
        connect_probe: bool,
        scrape_path: Path | None,
    ) -> None:
        self.metrics_url, self.metrics_source = metrics_url, metrics_source
        self.interval_s = interval_s
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if self.metrics_url and scrape_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tokenpace-scrape-")
            scrape_path = Path(self._tmp.name) / "scrapes.jsonl"
        self.scrape_path = scrape_path
        self.scraper = (
            ScraperProcess(self.metrics_url, interval_s, scrape_path)
            if self.metrics_url and scrape_path is not None
            else None
        )
        self.probe = ConnectProbe(endpoint.host, endpoint.port) if connect_probe else None
        self.gpu: GpuWatch | None = None
        self.gpu_source = "off"
        self.start_ns = 0

    def temp_path(self, name: str) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tokenpace-scrape-")
        return Path(self._tmp.name) / name

    async def start(self) -> None:
        if self.scraper is not None:
            self.scraper.start()
            await asyncio.to_thread(self.scraper.wait_first_scrape)
        if self.gpu is not None:
            await self.gpu.start()
        if self.probe is not None:
            self.probe.start()

    async def stop(
        self, records: list[RequestRecord], start_ns: int, streamed: bool = True
    ) -> dict[str, Any]:
        """Stop watching; what was seen, analysed against the run's records. Each observer stops
        whatever happened to the other, so no scraper process outlives the run."""
        out: dict[str, Any] = {}
        self.start_ns = start_ns
        scrapes: list[dict[str, Any]] = []
        try:
            if self.probe is not None:
                await self.probe.stop()
                out["connect_probe"] = self.probe.summary(start_ns)
        finally:
            try:
                if self.scraper is not None:
                    scrapes = await asyncio.to_thread(self.scraper.stop)  # waits for its last scrape
                    analysis = analyse(scrapes, records, start_ns, streamed)
                    analysis.update(
                        url=strip_credentials(self.metrics_url or ""),
                        source=self.metrics_source,
                        interval_s=self.interval_s,
                        raw_file=str(self.scrape_path) if self._tmp is None else None,
                    )
                    out["server_metrics"] = analysis
            finally:
                try:
                    if self.gpu is not None:  # stopped whatever happened to the engine's scraper
                        out["gpu_metrics"] = await self.gpu.stop(scrapes, start_ns, self._tmp is None)
                finally:
                    if self._tmp is not None:
                        self._tmp.cleanup()
        return out

    def add_steady(self, observed: dict[str, Any], records: list[RequestRecord], steady: SteadyState) -> None:
        """The GPUs' readings and the engine's queue over the run's steady window (seconds on the
        observers' timeline: from the first measured send, the ramp-up left out)."""
        sends = [r.sent_ns for r in records if not r.warmup and r.sent_ns]
        if not sends or steady.window_s <= 0:
            return
        lo = (min(sends) - self.start_ns) / 1e9 + steady.ramp_s
        hi = lo + steady.window_s
        gpu = observed.get("gpu_metrics")
        if gpu:
            gpu["steady"] = steady_readings(gpu, lo, hi)
        server = observed.get("server_metrics")
        series = (server or {}).get("series") or {}
        if server is not None and series:
            server["steady"] = {"window_s": [lo, hi]} | {
                name: window_mean(series[name], lo, hi).to_dict()
                for name in ("running", "waiting", "kv_usage")
                if series.get(name)
            }

    def describe(self) -> dict[str, Any]:
        gpu = (
            self.gpu.describe() if self.gpu else {"gpu_metrics": None, "gpu_metrics_source": self.gpu_source}
        )
        return gpu | {
            "server_metrics": strip_credentials(self.metrics_url) if self.metrics_url else None,
            "server_metrics_source": self.metrics_source,
            "server_metrics_interval_s": self.interval_s if self.metrics_url else None,
            "connect_probe": self.probe is not None,
        }
