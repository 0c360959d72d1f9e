"""The GPUs beside a run (``--gpu-metrics URL|nvidia-smi|auto|off``): which source, and its scraper.

A URL is a dcgm-exporter page (or an engine exporting DCGM's names, as the simulator does); it
must answer before any load, or the run is refused. ``nvidia-smi`` reads the local GPUs; absent, the
run is refused with why. ``auto`` is quiet: the engine's own /metrics when it carries DCGM's fields,
else nvidia-smi when the engine is on this host and the program reads a GPU, else off.
The scrapes are the same scraper's (adapters/servermetrics), with its bounds and clock.
"""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Any

from tokenpace.adapters.servermetrics import (
    NVIDIA_SMI,
    ScraperProcess,
    probe_gpu_url,
    probe_nvidia_smi,
)
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.core.analysis.diagnosis.gpu_metrics import analyse_gpu
from tokenpace.core.credentials import strip_credentials
from tokenpace.wire.endpoint import Endpoint


def _local(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def gpu_source_for(
    endpoint: Endpoint, setting: str, engine_metrics_url: str | None
) -> tuple[str | None, str]:
    """(what to scrape, why): a URL, ``nvidia-smi``, or None (off)."""
    if setting == "off":
        return None, "off"
    if setting == NVIDIA_SMI:
        problem = await asyncio.to_thread(probe_nvidia_smi)
        if problem:
            raise PreflightError(f"--gpu-metrics nvidia-smi: {problem}")
        return NVIDIA_SMI, "given"
    if setting != "auto":
        problem = await asyncio.to_thread(probe_gpu_url, setting)
        if problem:
            raise PreflightError(f"--gpu-metrics: {problem}")
        return setting, "given"
    if engine_metrics_url and not await asyncio.to_thread(probe_gpu_url, engine_metrics_url):
        return engine_metrics_url, "auto: the engine's /metrics"
    if _local(endpoint.host) and not await asyncio.to_thread(probe_nvidia_smi):
        return NVIDIA_SMI, "auto: nvidia-smi (the engine is on this host)"
    return None, "auto: none (no DCGM fields on the engine's /metrics, no local nvidia-smi)"


def gpu_scrape_path(scrape_path: Path) -> Path:
    """Beside the engine's scrapes file: RESULT.gpu-metrics.jsonl."""
    name = scrape_path.name
    new = name.replace("server-metrics", "gpu-metrics") if "server-metrics" in name else f"{name}.gpu"
    return scrape_path.with_name(new)


class GpuWatch:
    """The GPU source's scraper, or none when it is the engine's page (its scrapes are reused)."""

    def __init__(self, url: str, source: str, interval_s: float, path: Path | None, shared: bool) -> None:
        self.url, self.source, self.interval_s, self.path = url, source, interval_s, path
        self.scraper = None if shared or path is None else ScraperProcess(url, interval_s, path)

    async def start(self) -> None:
        if self.scraper is not None:
            self.scraper.start()
            await asyncio.to_thread(self.scraper.wait_first_scrape)

    async def stop(self, engine_scrapes: list[dict[str, Any]], start_ns: int, kept: bool) -> dict[str, Any]:
        """Every scrape analysed on the run's timeline; ``kept``: the scrapes file stays beside the result."""
        scrapes = engine_scrapes
        if self.scraper is not None:
            scrapes = await asyncio.to_thread(self.scraper.stop)
        out = analyse_gpu(scrapes, start_ns)
        out.update(
            url=strip_credentials(self.url),
            source=self.source,
            interval_s=self.interval_s,
            raw_file=str(self.path) if kept and self.scraper is not None else None,
        )
        return out

    def describe(self) -> dict[str, Any]:
        return {"gpu_metrics": strip_credentials(self.url), "gpu_metrics_source": self.source}
