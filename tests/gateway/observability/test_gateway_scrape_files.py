"""--scrape-upstream-metrics runs for months: the scraper's file is rotated at a bound and the
gateway's tail follows the rotation without losing a line."""

from __future__ import annotations

import http.server
import os
import threading
import time
from pathlib import Path

import orjson

from tokenpace.adapters.servermetrics import ScraperProcess
from tokenpace.adapters.servermetrics.scraper import scrape_once
from tokenpace.gateway.observability.engine_watch import ROTATE_BYTES, _Tail


def line(i: int) -> bytes:
    return orjson.dumps({"t_ns": i}) + b"\n"


def test_tail_reads_the_old_file_to_its_end_then_follows_the_name(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    out = path.open("wb")
    tail = _Tail(path)
    got: list[int] = []
    out.write(line(0) + line(1) + b'{"t_ns": 2')  # the third line is still being written
    out.flush()
    got += [d["t_ns"] for d in tail.read()]
    assert got == [0, 1]
    out.write(b"}\n" + line(3))  # finished, and one more, before the rotation
    out.close()
    os.replace(path, str(path) + ".1")
    out = path.open("wb")
    out.write(line(4))
    out.flush()
    got += [d["t_ns"] for d in tail.read()]
    assert got == [0, 1, 2, 3, 4]
    out.write(line(5))
    out.close()
    assert [d["t_ns"] for d in tail.read()] == [5]
    tail.close()


def test_scraper_rotates_at_the_bound_and_no_scrape_is_lost(tmp_path: Path) -> None:
    assert ROTATE_BYTES == 4 * 1024 * 1024  # the bound docs/gateway.md states
    path = tmp_path / "scrapes.jsonl"
    # an address that refuses: each scrape is a short error line, written at once
    scraper = ScraperProcess("http://127.0.0.1:9/metrics", 0.01, path, rotate_bytes=2000)
    tail = _Tail(path)
    seen: list[int] = []
    biggest = 0
    scraper.start()
    try:
        deadline = time.monotonic() + 20  # a liveness bound
        while len(seen) < 120 and time.monotonic() < deadline:
            seen += [d["t_ns"] for d in tail.read()]
            for p in (path, Path(str(path) + ".1")):
                if p.exists():
                    biggest = max(biggest, p.stat().st_size)
            time.sleep(0.02)
    finally:
        scraper.stop()
    seen += [d["t_ns"] for d in tail.read()]
    tail.close()
    assert len(seen) >= 120
    assert seen == sorted(set(seen))  # in order, none twice
    assert Path(str(path) + ".1").exists()  # it did rotate ...
    assert biggest < 2000 + 400  # ... at the bound (plus at most one line)
    assert sorted(os.listdir(tmp_path)) == ["scrapes.jsonl", "scrapes.jsonl.1"]


def test_a_metrics_page_past_the_bound_is_not_read_nor_parsed() -> None:
    from tokenpace.adapters.servermetrics.scraper import MAX_PAGE_BYTES

    class Huge(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            line = b'vllm:num_requests_running{engine="0",model_name="m",i="%d"} 1\n'
            page = b"".join(line % i for i in range(MAX_PAGE_BYTES // 50))
            self.send_response(200)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        got = scrape_once(f"http://127.0.0.1:{server.server_port}/metrics", 10.0)
    finally:
        server.shutdown()
    assert "samples" not in got and got["error"].startswith("metrics page over 2 MiB")


class _Hostile(http.server.BaseHTTPRequestHandler):
    """An endless /metrics body, or one that drips a byte every 0.1 s (forever, until shut down)."""

    stop = threading.Event()

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        drip = self.path.endswith("drip")
        line = b"x 1\n" if drip else b"tokenpace_flood 1\n" * 4096
        while not self.stop.is_set():
            try:
                self.wfile.write(line[:1] if drip else line)
                self.wfile.flush()
            except OSError:
                return
            if drip:
                time.sleep(0.1)

    def log_message(self, *args: object) -> None:
        pass


def _probe_beside(path: str, timeout_s: float) -> tuple[str | None, float]:
    from tokenpace.adapters.servermetrics import probe_metrics_url

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    _Hostile.stop.clear()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    got: list[str | None] = []
    url = f"http://127.0.0.1:{server.server_port}/{path}"
    probe = threading.Thread(target=lambda: got.append(probe_metrics_url(url, timeout_s)), daemon=True)
    t0 = time.monotonic()
    probe.start()
    probe.join(30)  # a liveness bound only: the old probe never returned from either
    took = time.monotonic() - t0
    _Hostile.stop.set()
    server.shutdown()
    assert got, "the probe never returned"
    return got[0], took


def test_startup_probe_of_an_endless_metrics_body_stops_at_the_page_cap() -> None:
    """Issue 38, class 3: the start-up /metrics check read the whole body (790 MB, then 2.7 GB)."""
    problem, _ = _probe_beside("metrics", 5.0)
    assert problem is not None and "page over 2 MiB: not read" in problem


def test_startup_probe_of_a_dripping_metrics_body_stops_at_its_deadline() -> None:
    """Issue 38, class 3: a 1 byte/s body blocked start-up (each byte reset urllib's timeout)."""
    problem, _ = _probe_beside("drip", 1.0)
    assert problem is not None and "too slow: not complete within its deadline" in problem


def test_a_dripping_scrape_is_an_error_line_at_its_deadline() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    _Hostile.stop.clear()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        got = scrape_once(f"http://127.0.0.1:{server.server_port}/drip", 1.0)
    finally:
        _Hostile.stop.set()
        server.shutdown()
    assert got["error"] == "metrics page too slow: not complete within its deadline"
