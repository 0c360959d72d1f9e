"""A scripted dcgm-exporter: NVIDIA's metric names, help texts and labels, readings known in advance.

``with DcgmExporter(gpus=2, util=[10, 50, 90]) as exp: exp.url`` serves ``/metrics`` on 127.0.0.1;
the n-th page (counted from 0) reads ``util[n]`` (the last one once the list runs out) on every GPU,
plus ``spread`` per GPU index (GPU i reads util + i * spread), so the mean over GPUs is known too.
``hostile`` plays a broken or hostile exporter: ``oversize`` (a page past the scraper's cap),
``garbage`` (not Prometheus text), ``out_of_range`` (utilisation 250 %, power -5 W, NaN clocks),
``many_gpus`` (200 GPUs on one page), ``slow`` (a byte every 0.2 s), ``after`` pages honest first.
A thread serves it (http.server), so blocking probes and the scraper's process both reach it.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Sequence
from typing import Any

# (field, help) as dcgm-exporter's default counters name them
FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
)
MODEL = "NVIDIA H100 80GB HBM3"


def gpu_labels(i: int, host: str = "gpu-node-1") -> str:
    return (
        f'gpu="{i}",UUID="GPU-5fd4c8a2-0b5e-4a5c-9d7e-{i:012d}",'
        f'pci_bus_id="00000000:{18 + i:02X}:00.0",'
        f'device="nvidia{i}",modelName="{MODEL}",Hostname="{host}",DCGM_FI_DRIVER_VERSION="550.54.15",'
        'container="vllm",namespace="inference",pod="vllm-0"'
    )


def page(util: float, gpus: int, spread: float = 0.0, power_per_util: float = 6.0, prof: bool = True) -> str:
    """One honest page: GPU i at ``util + i * spread`` %, power 70 W + ``power_per_util`` W per %."""
    lines = []
    for field, help_ in FIELDS:
        if field.startswith("DCGM_FI_PROF") and not prof:
            continue  # profiling fields need DCGM's profiling module: not every exporter has them
        lines += [f"# HELP {field} {help_}", f"# TYPE {field} gauge"]
        for i in range(gpus):
            u = util + i * spread
            value = {
                "DCGM_FI_DEV_SM_CLOCK": 1980,
                "DCGM_FI_DEV_GPU_UTIL": round(u),
                "DCGM_FI_DEV_FB_USED": 72000 + i,
                "DCGM_FI_DEV_POWER_USAGE": round(70 + power_per_util * u, 3),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(u / 100, 6),
            }[field]
            lines.append(f"{field}{{{gpu_labels(i)}}} {value}")
    return "\n".join(lines) + "\n"


class DcgmExporter:
    def __init__(
        self,
        gpus: int = 1,
        util: Sequence[float] = (50.0,),
        spread: float = 0.0,
        hostile: str | None = None,
        after: int = 0,
        prof: bool = True,
    ) -> None:
        self.gpus, self.util, self.spread, self.prof = gpus, list(util), spread, prof
        self.hostile, self.after = hostile, after
        self.pages = 0  # pages served
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner._answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/metrics"

    def _body(self) -> bytes:
        with self._lock:
            n = self.pages
            self.pages += 1
        util = self.util[min(n, len(self.util) - 1)]
        mode = self.hostile if n >= self.after else None
        if mode == "oversize":
            return b"# padding\n" * (300 * 1024)  # 3 MiB
        if mode == "garbage":
            return b"<html>not metrics{{{\n"
        if mode == "out_of_range":
            labels = gpu_labels(0)
            return (
                f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 250\nDCGM_FI_DEV_POWER_USAGE{{{labels}}} -5\n"
                f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} NaN\nDCGM_FI_DEV_FB_USED{{{labels}}} 1000\n"
            ).encode()
        if mode == "many_gpus":
            return page(util, 200).encode()
        return page(util, self.gpus, self.spread, prof=self.prof).encode()

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        if handler.path.split("?")[0] != "/metrics":
            handler.send_error(404)
            return
        body = self._body()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if self.hostile == "slow" and self.pages > self.after:
            for i in range(len(body)):
                handler.wfile.write(body[i : i + 1])
                handler.wfile.flush()
                time.sleep(0.2)
            return
        handler.wfile.write(body)

    def __enter__(self) -> DcgmExporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
