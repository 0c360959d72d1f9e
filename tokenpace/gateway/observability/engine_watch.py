"""Gateway TTFT beside engine TTFT, per upstream: where the wait went (engine or network + proxy).

Each upstream's own ``/metrics`` is scraped by the project's scraper process
(``tokenpace.adapters.servermetrics``), so fetching and parsing never run on the proxy's event
loop; the gateway only tails the scraper's JSON lines every interval. Scrapes and request records
share the monotonic clock (``perf_counter_ns``), so ``engine_metrics.analyse`` can put the
records whose first token fell between two scrapes against what the engine counted meanwhile.
A window of recent scrapes is analysed; the result is served as JSON and as gauges.
An upstream's ``gpu_metrics=`` (a dcgm-exporter URL, or ``nvidia-smi``) is scraped the same way
(its own scraper, unless it is the engine's page); its GPUs' latest readings and the engine's
waiting requests are gauges too, for the capacity warning (observability/rules.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from prometheus_client import CollectorRegistry, Gauge

from tokenpace.adapters.servermetrics import ScraperProcess
from tokenpace.core.analysis.diagnosis.engine_metrics import analyse
from tokenpace.core.analysis.diagnosis.gpu_metrics import analyse_gpu
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import Upstream

ENGINE_TTFT = "tokenpace_gateway_upstream_engine_ttft_seconds"
GATEWAY_TTFT = "tokenpace_gateway_upstream_gateway_ttft_seconds"
NETWORK = "tokenpace_gateway_upstream_network_and_proxy_seconds"
ENGINE_QUEUE = "tokenpace_gateway_upstream_engine_queue_seconds"
ENGINE_WAITING = "tokenpace_gateway_upstream_engine_waiting_requests"
GPU_UTIL = "tokenpace_gateway_upstream_gpu_utilization_percent"
GPU_POWER = "tokenpace_gateway_upstream_gpu_power_watts"


def metrics_url(up: Upstream) -> str:
    """The upstream's own /metrics: ``metrics=URL`` when given, else beside its API root."""
    return up.metrics_url or f"{up.origin}{up.base_path}/metrics"


def metrics_auth(up: Upstream) -> str | None:
    """The upstream URL's credentials serve its default /metrics too (``metrics=URL`` has its own)."""
    return None if up.metrics_url else up.auth


# The scraper starts a new file past this size, keeping one previous file: on disk at most two
# files of 4 MiB per upstream (a third while the tail finishes a replaced one), however long it runs.
ROTATE_BYTES = 4 * 1024 * 1024


TAIL_READ_BYTES = 8 * 1024 * 1024  # the scrapes file read per look (a scrape line: one page, <= 2 MiB)


class _Tail:
    """New complete JSON lines of a file that another process appends to and rotates: the open
    file is read to its end before the name is followed to the new one, so no line is lost."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh: BinaryIO | None = None
        self.partial = b""  # a line being written waits for the next read

    def read(self) -> list[dict[str, Any]]:
        if self.fh is None:
            try:
                self.fh = self.path.open("rb")
            except OSError:
                return []
        rotated = self._rotated()  # asked first: once renamed, the old file gets no more lines
        out = self._drain()
        if rotated:
            self.close()
            out += self.read()
        return out

    def _rotated(self) -> bool:
        assert self.fh is not None
        try:
            return os.stat(self.path).st_ino != os.fstat(self.fh.fileno()).st_ino
        except OSError:
            return False  # between the rename and the new file: next time

    def _drain(self) -> list[dict[str, Any]]:
        assert self.fh is not None
        data = self.partial + self.fh.read(TAIL_READ_BYTES)  # the rest, if any: the next call
        end = data.rfind(b"\n") + 1
        self.partial = data[end:]
        if len(self.partial) > TAIL_READ_BYTES:  # no scrape line is this long: not one of ours
            self.partial = b""
        out = []
        for line in data[:end].splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                out.append(orjson.loads(line))
        return out

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        self.partial = b""


class _Watched:
    def __init__(self, up: Upstream, url: str, interval_s: float, path: Path, window: int) -> None:
        self.upstream = up
        self.scraper = ScraperProcess(url, interval_s, path, metrics_auth(up), ROTATE_BYTES)
        self.tail = _Tail(path)
        self.scrapes: deque[dict[str, Any]] = deque(maxlen=window)
        self.records: deque[RequestRecord] = deque(maxlen=20_000)
        self.view: dict[str, Any] = {"scrapes": 0, "engine": "unknown"}
        # the GPUs: their own scraper, or the engine's scrapes when it is the same page
        gpu = up.gpu_metrics if up.gpu_metrics != url else None
        gpu_path = path.with_suffix(".gpu.jsonl")
        self.gpu_scraper = ScraperProcess(gpu, interval_s, gpu_path, None, ROTATE_BYTES) if gpu else None
        self.gpu_tail = _Tail(gpu_path) if gpu else None
        self.gpu_scrapes: deque[dict[str, Any]] = deque(maxlen=2)  # the latest reading is what is shown


class EngineWatch:
    def __init__(
        self,
        upstreams: tuple[Upstream, ...],
        registry: CollectorRegistry,
        interval_s: float = 5.0,
        window_s: float = 60.0,
    ) -> None:
        self.interval_s = interval_s
        self.start_ns = time.perf_counter_ns()
        self._dir = tempfile.TemporaryDirectory(prefix="tokenpace-gw-scrapes-")
        window = max(2, round(window_s / interval_s) + 1)
        self.watched = {
            u.name: _Watched(u, metrics_url(u), interval_s, Path(self._dir.name) / f"{i}.jsonl", window)
            for i, u in enumerate(upstreams)
        }
        self.engine_ttft = Gauge(
            ENGINE_TTFT, "Engine's own mean TTFT over the window", ("upstream",), registry=registry
        )
        self.gateway_ttft = Gauge(
            GATEWAY_TTFT,
            "Gateway mean TTFT over the same window and requests",
            ("upstream",),
            registry=registry,
        )
        self.network = Gauge(
            NETWORK, "Gateway TTFT minus engine TTFT (network, proxy, HTTP)", ("upstream",), registry=registry
        )
        self.queue = Gauge(
            ENGINE_QUEUE, "Engine's mean queue time over the window", ("upstream",), registry=registry
        )
        self.waiting = Gauge(
            ENGINE_WAITING,
            "Requests waiting in the engine at its latest scrape",
            ("upstream",),
            registry=registry,
        )
        gpu_labels = ("upstream", "gpu")  # gpu: host/index, at most MAX_GPUS per upstream
        self.gpu_util = Gauge(
            GPU_UTIL, "GPU utilisation (DCGM_FI_DEV_GPU_UTIL)", gpu_labels, registry=registry
        )
        self.gpu_power = Gauge(
            GPU_POWER, "GPU power draw (DCGM_FI_DEV_POWER_USAGE)", gpu_labels, registry=registry
        )
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()  # one reader of the scrape files at a time

    def add(self, rec: RequestRecord) -> None:
        """A finished record (hot path: one dict lookup and a deque append)."""
        if rec.status is Status.OK and rec.first_token_ns is not None:
            w = self.watched.get(rec.labels.get("upstream", ""))
            if w is not None:
                w.records.append(rec)

    def start(self) -> None:
        for w in self.watched.values():
            w.scraper.start()
            if w.gpu_scraper is not None:
                w.gpu_scraper.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Reading and parsing the scrape files (bounded: two 4 MiB files) runs in a thread, so a
        big page never holds the loop; the records it joins are copied on the loop first."""
        while True:
            await asyncio.sleep(self.interval_s)
            for name, w in self.watched.items():
                records = list(w.records)
                view = await asyncio.to_thread(self._analyse, w, records)
                if view is not None:
                    self._publish(name, w, view)

    def refresh(self) -> None:
        """On the loop (the /tokenpace/upstreams page): when the thread is at it, the last view stands."""
        for name, w in self.watched.items():
            view = self._analyse(w, list(w.records), wait=False)
            if view is not None:
                self._publish(name, w, view)

    def _analyse(self, w: _Watched, records: list[RequestRecord], wait: bool = True) -> dict[str, Any] | None:
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            w.scrapes.extend(w.tail.read())
            if w.gpu_tail is not None:
                w.gpu_scrapes.extend(w.gpu_tail.read())
            if not w.scrapes:
                return None
            first_ns = w.scrapes[0]["t_ns"]
            recent = [r for r in records if (r.first_token_ns or 0) >= first_ns]  # in the window
            view = analyse(list(w.scrapes), recent, self.start_ns)
            view["_first_ns"] = first_ns
            gpu_scrapes = list(w.gpu_scrapes) if w.gpu_tail is not None else list(w.scrapes)[-2:]
        finally:
            self._lock.release()
        waiting = (view.pop("series", None) or {}).get("waiting")
        view["waiting"] = waiting[-1][1] if waiting else None
        if w.upstream.gpu_metrics:
            view["gpu"] = _latest_gpu(analyse_gpu(gpu_scrapes, self.start_ns))
        return view

    def _publish(self, name: str, w: _Watched, view: dict[str, Any]) -> None:
        first_ns = view.pop("_first_ns", 0)
        while w.records and (w.records[0].first_token_ns or 0) < first_ns:
            w.records.popleft()  # older than the window
        w.view = view
        d = view.get("decomposition")
        if d:
            self.engine_ttft.labels(name).set(d["engine_ttft_mean_ms"] / 1000)
            self.gateway_ttft.labels(name).set(d["client_ttft_mean_ms"] / 1000)
            self.network.labels(name).set(d["network_and_client_ms"] / 1000)
            if d.get("engine_queue_mean_ms") is not None:
                self.queue.labels(name).set(d["engine_queue_mean_ms"] / 1000)
        if view.get("waiting") is not None:
            self.waiting.labels(name).set(view["waiting"])
        for gpu, reading in ((view.get("gpu") or {}).get("per_gpu") or {}).items():
            if reading.get("util_pct") is not None:
                self.gpu_util.labels(name, gpu).set(reading["util_pct"])
            if reading.get("power_w") is not None:
                self.gpu_power.labels(name, gpu).set(reading["power_w"])

    def snapshot(self) -> dict[str, Any]:
        """Per upstream: engine, window, engine latencies and the TTFT decomposition (JSON-ready).
        The gateway's TTFT stands where analyse says "client": the gateway is the engine's client."""
        out = {}
        for name, w in self.watched.items():
            v = dict(w.view)
            v["upstream"], v["arm"] = name, w.upstream.arm
            v["scrape_interval_s"] = self.interval_s
            out[name] = v
        return {"upstreams": out}

    async def close(self, timeout_s: float = 10.0) -> None:
        """Stops the scrapers within ``timeout_s`` (all told to stop at once; one still running
        past it is killed)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self._stop_scrapers, timeout_s)

    def _stop_scrapers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        scrapers = [s for w in self.watched.values() for s in (w.scraper, w.gpu_scraper) if s is not None]
        for scraper in scrapers:
            scraper.terminate()
        for scraper in scrapers:
            scraper.stop(max(0.0, deadline - time.monotonic()))
        for w in self.watched.values():
            with self._lock:  # a refresh thread may still be reading
                w.scrapes.extend(w.tail.read())
                w.tail.close()
                if w.gpu_tail is not None:
                    w.gpu_tail.close()
        self._dir.cleanup()


def _latest_gpu(analysis: dict[str, Any]) -> dict[str, Any]:
    """The latest reading of each field, per GPU and as the mean over GPUs, and the GPUs' names."""
    series = analysis.get("series") or {}
    mean = {k: points[-1][1] for k, points in (series.get("mean") or {}).items() if points}
    per_gpu: dict[str, dict[str, float]] = {}
    for field, gpus in (series.get("per_gpu") or {}).items():
        for gpu, points in gpus.items():
            if points:
                per_gpu.setdefault(gpu, {})[field] = points[-1][1]
    errors = analysis.get("errors", 0)
    return {"mean": mean, "per_gpu": per_gpu, "gpus": analysis.get("gpus"), "errors": errors}
