"""The traced gateway the OTLP tests share: one gateway in front of a FixedUpstream, its spans
caught by an in-memory exporter (the exporting path itself: test_otlp.py's collector test), its
records kept as they end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.request_path.test_gateway import FixedUpstream
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.otlp import Traces


@dataclass
class TracedGateway:
    exporter: Any  # opentelemetry's InMemorySpanExporter
    records: list[RequestRecord] = field(default_factory=list)  # in the order they ended

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[tuple[RunningGateway, FixedUpstream]]:
        """The gateway, listening, and its upstream (which remembers the headers it got)."""
        async with FixedUpstream() as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0)
            gw = RunningGateway(config, on_record=self.records.append)
            gw.gateway.traces = Traces(None, exporter=self.exporter)
            async with gw:
                yield gw, up

    def spans(self) -> list[Any]:
        """The spans exported so far (the gateway's cleanup flushes its batch)."""
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def traced_gateway() -> TracedGateway:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    return TracedGateway(InMemorySpanExporter())
