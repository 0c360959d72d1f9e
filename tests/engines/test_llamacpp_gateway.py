"""`tokenpace gateway` in front of llama-server: byte-exact pass-through and correct records.

A recording TCP relay sits between the gateway and llama-server, so the test compares the bytes the
client received with the bytes the engine really sent for the same request (no volatile fields such
as `id` or `created` to normalise away).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httptools
import pytest

from engines.engines_support import LlamaServer, gateway_in_front, read_jsonl, run_cli, wait_records
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.testing.tinymodel import MODEL_NAME, TEMPLATE_OVERHEAD


class RecordingRelay:
    """Forwards TCP connections to ``upstream_port`` and keeps every byte the upstream sent."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.received: list[bytearray] = []  # per connection, upstream -> client
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> RecordingRelay:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() call
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self.threads:
            t.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self.threads.append(t)
        t.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            buf = bytearray()
            with self.lock:
                self.received.append(buf)
                self.sockets += [client, upstream]
            self._spawn(self._pipe, client, upstream, None)
            self._spawn(self._pipe, upstream, client, buf)

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if record is not None:
                    with self.lock:
                        record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def bodies(self) -> list[bytes]:
        """Every response body the upstream sent (chunked transfer decoded)."""
        with self.lock:
            streams = [bytes(b) for b in self.received]
        collector = _Bodies()
        for raw in streams:
            httptools.HttpResponseParser(collector).feed_data(raw)
        return collector.bodies


class _Bodies:
    """httptools callbacks: the body of each complete response."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.parts: list[bytes] = []

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.bodies.append(b"".join(self.parts))
        self.parts.clear()


@pytest.fixture
def gateway(llama_server: LlamaServer, tmp_path: Path) -> Iterator[tuple[str, RecordingRelay, Path]]:
    with RecordingRelay(llama_server.port) as relay, gateway_in_front(relay.url, tmp_path) as (url, records):
        yield url, relay, records


def post(url: str, body: dict) -> bytes:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
        return resp.read()


def test_streams_and_other_paths_pass_through_byte_exactly(
    gateway: tuple[str, RecordingRelay, Path],
) -> None:
    base, relay, _ = gateway
    chat = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": "the city of light"}],
        "max_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    streamed = post(base + "/v1/chat/completions", chat)
    tokenized = post(base + "/tokenize", {"content": "the city of light"})
    whole = post(base + "/v1/chat/completions", chat | {"stream": False})
    upstream = relay.bodies()
    assert streamed in upstream
    assert tokenized in upstream
    assert whole in upstream
    events = [e.removeprefix(b"data: ") for e in streamed.split(b"\n\n") if e]
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 12
    assert chunks[-1]["usage"]["completion_tokens"] == 12
    assert json.loads(tokenized)["tokens"] and len(json.loads(tokenized)["tokens"]) == 4


def test_bench_through_gateway_records_match_usage(
    gateway: tuple[str, RecordingRelay, Path], llama_server: LlamaServer, tmp_path: Path
) -> None:
    base, _, records_file = gateway
    out = tmp_path / "bench.json"
    # The endpoint's own /metrics is the gateway's: point the scraper at the engine behind it.
    engine_metrics = llama_server.base + "/metrics"
    run_cli(
        "bench", "--url", base + "/v1", "-c", "2", "-n", "8", "--input-len", "24", "--output-len", "10",
        "--no-store", "-q", "--out", str(out), "--server-metrics", engine_metrics,
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["summary"]["tokens"]["mismatched"] == 0
    assert result["server_metrics"]["engine"] == "llama.cpp"
    assert result["server_metrics"]["url"] == engine_metrics
    assert result["server_metrics"]["counters"]["generation_tokens"] == 8 * 10
    client = read_jsonl(out.parent / result["records"]["path"])
    assert [(r["status"], r["error"]) for r in client] == [("ok", None)] * 8
    # The gateway measured the same requests: its records carry the engine's usage too.
    wait_records(records_file, 8)
    seen = read_jsonl(records_file)
    assert len(seen) == 8
    for r in seen:
        assert r["status"] == "ok"
        assert r["prompt_tokens"] == 24 + SALT_TOKENS + TEMPLATE_OVERHEAD
        assert r["output_tokens_server"] == r["output_tokens_counted"] == len(r["token_ns"]) == 10
        assert r["first_token_ns"] == r["token_ns"][0]
