"""A real OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` (what the SDK's OTLPSpanExporter sends), on 127.0.0.1, in a thread.

    with OtlpReceiver() as rx:
        ... export to rx.url ...
        spans = rx.wait_for(30)          # each span as a plain dict
        rx.write_jsonl(path)             # one span per line: what ``runs show --traces`` reads

At most ``max_spans`` spans are kept (100,000 by default); past that they are counted in ``dropped``.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

_KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return getattr(v, which) if which else None


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kv: KeyValue
    for kv in kvs:
        out[kv.key] = _value(kv.value)
    return out


def spans_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """Each span of one export as a plain dict (ids in lowercase hex, times in Unix ns)."""
    out: list[dict[str, Any]] = []
    for rs in request.resource_spans:
        resource = _attributes(rs.resource.attributes)  # service.name, a gateway's --labels, ...
        service = resource.get("service.name", "")
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_id": s.parent_span_id.hex() or None,
                        "name": s.name,
                        "kind": _KINDS.get(s.kind, "unspecified"),
                        "service": service,
                        "resource": resource,
                        "start_ns": s.start_time_unix_nano,
                        "end_ns": s.end_time_unix_nano,
                        "attributes": _attributes(s.attributes),
                        "events": [
                            {
                                "name": e.name,
                                "time_ns": e.time_unix_nano,
                                "attributes": _attributes(e.attributes),
                            }
                            for e in s.events
                        ],
                    }
                )
    return out


class OtlpReceiver:
    def __init__(self, max_spans: int = 100_000) -> None:
        self.max_spans = max_spans
        self.spans: list[dict[str, Any]] = []
        self.dropped = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._add(spans_of(request))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _add(self, spans: list[dict[str, Any]]) -> None:
        with self._lock:
            room = max(0, self.max_spans - len(self.spans))
            self.spans += spans[:room]
            self.dropped += len(spans) - min(room, len(spans))

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, timeout: float, until: Any = None) -> list[dict[str, Any]]:
        """The spans once ``until(spans)`` holds (default: any span), or what came by ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if (until(spans) if until else spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def write_jsonl(self, path: str | Path) -> None:
        with Path(path).open("w") as f:
            for span in self.snapshot():
                f.write(json.dumps(span) + "\n")

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
