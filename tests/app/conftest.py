"""The traced stack of docs/tracing.md, for the tracing tests: its simulator and
gateway lines run as written (ports and the collector's URL replaced), both exporting to one real
OTLP/HTTP receiver, and a documented bench line sent through them."""

from __future__ import annotations

import shlex
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from docs.test_doc_commands import _Server

from tokenpace.testing.procs import FINISHED, free_port, run_cli

if TYPE_CHECKING:
    from tokenpace.testing.otlp_receiver import OtlpReceiver

DOC = Path(__file__).resolve().parents[2] / "docs" / "tracing.md"
COLLECTOR = "http://127.0.0.1:4318/v1/traces"  # the docs' collector
TRACING = "## Tracing: one trace per request"  # the section whose first block starts the stack


def doc_commands(heading: str) -> list[str]:
    """The `tokenpace` lines of the first ```sh block after ``heading`` in docs/tracing.md."""
    text = DOC.read_text()
    section = text[text.index(heading) :]
    start = section.index("```sh\n") + 6
    block = section[start : section.index("```\n", start)]
    return [line for line in block.splitlines() if line.startswith("tokenpace ")]


def _openmetrics(origin: str) -> str:
    accept = {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}
    with urllib.request.urlopen(urllib.request.Request(origin + "/metrics", headers=accept), timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(r.read().decode())


@dataclass
class TracedStack:
    tmp_path: Path
    env: dict[str, str]  # a throwaway store
    rx: OtlpReceiver  # where the simulator, the gateway and the bench send their spans

    def bench(self, bench_line: str) -> str:
        """``bench_line`` (a documented bench, its URL the docs' gateway) through the documented
        gateway in front of the documented simulator; the gateway's /metrics in OpenMetrics, read
        before it stopped. Both are stopped with SIGINT, which flushes their spans."""
        sim_line, gateway_line, *_ = doc_commands(TRACING)
        sim = _Server(shlex.split(sim_line.replace(COLLECTOR, self.rx.url).replace("8000", "0"))[1:])
        try:
            port = free_port()
            line = gateway_line.replace(COLLECTOR, self.rx.url).replace("127.0.0.1:9000", f"127.0.0.1:{port}")
            argv = shlex.split(line.replace("http://127.0.0.1:8000/v1", sim.url))[1:]
            gateway = _Server(argv, self.env, self.tmp_path)
            try:
                line = bench_line.replace(COLLECTOR, self.rx.url).replace(
                    "http://127.0.0.1:9000/v1", gateway.url
                )
                bench = run_cli(*shlex.split(line)[1:], "-q", env=self.env, cwd=str(self.tmp_path))
                assert bench.returncode in FINISHED, bench.stderr
                return _openmetrics(gateway.origin)
            finally:
                assert gateway.stop() == 0, gateway.lines
        finally:
            assert sim.stop() == 0, sim.lines


@pytest.fixture
def traced_stack(tmp_path: Path) -> Iterator[TracedStack]:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from tokenpace.testing.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as rx:
        yield TracedStack(tmp_path, {"TOKENPACE_STORE": str(tmp_path / "runs.db")}, rx)
