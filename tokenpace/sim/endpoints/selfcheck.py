"""Measure the real-time sim's own timing error:
`python -m tokenpace.sim.endpoints.selfcheck [--streams 1,64,256]`.

For each concurrency it starts `tokenpace sim` in a child process pinned to one core, drives that
many closed-loop streams from this process pinned to another core, and reads back from /metrics how
late the server wrote each step's tokens against the model's schedule (the worst token of every step,
since a step's writes go out one after another), plus the server's CPU use. The lag is the whole error
the sim adds to what a client measures; the client's own error is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time

REQ = (
    "POST /v1/completions HTTP/1.1\r\nhost: x\r\n"
    "content-type: application/json\r\ncontent-length: {n}\r\n\r\n{b}"
)


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


async def _stream(port: int, body: str, stop_at: float, tokens: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    req = REQ.format(n=len(body), b=body).encode()
    try:
        while time.monotonic() < stop_at:
            writer.write(req)
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                tokens[0] += data.count(b'"text":" ')
                if data.endswith(b"0\r\n\r\n"):
                    break
    finally:
        writer.close()


def _metric(text: str, name: str, quantile: str) -> float:
    m = re.search(rf'{re.escape(name)}{{[^}}]*quantile="{quantile}"}} (\S+)', text)
    return float(m.group(1)) if m else float("nan")


async def _level(streams: int, seconds: float, profile: str | None) -> dict[str, float]:
    cmd = [sys.executable, "-m", "tokenpace", "sim", "--port", "0", "--max-num-seqs", str(max(256, streams))]
    if profile:
        cmd += ["--profile", profile]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, preexec_fn=lambda: _pin(0))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        body = '{"prompt":"' + "hello " * 127 + 'x","max_tokens":200,"ignore_eos":true,"stream":true}'
        tokens = [0]
        cpu0 = _cpu(proc.pid)
        t0 = time.monotonic()
        await asyncio.gather(*(_stream(port, body, t0 + seconds, tokens) for _ in range(streams)))
        wall = time.monotonic() - t0
        cpu = _cpu(proc.pid) - cpu0
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        text = (await reader.read()).decode()
        writer.close()
    finally:
        proc.terminate()
        proc.wait()
    name = "tokenpace_sim_emit_lag_recent_seconds"
    first = "tokenpace_sim_first_emit_lag_recent_seconds"
    return {
        "streams": streams,
        "first_p50_ms": _metric(text, first, "0.5") * 1e3,
        "first_p99_ms": _metric(text, first, "0.99") * 1e3,
        "lag_p50_ms": _metric(text, name, "0.5") * 1e3,
        "lag_p90_ms": _metric(text, name, "0.9") * 1e3,
        "lag_p99_ms": _metric(text, name, "0.99") * 1e3,
        "lag_max_ms": _metric(text, name, "1") * 1e3,
        "tokens_per_s": tokens[0] / wall,
        "server_cpu": cpu / wall,
        "cpu_us_per_token": cpu / max(tokens[0], 1) * 1e6,
    }


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,64,256,512")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--profile", default=None)
    a = ap.parse_args()
    _pin(1)
    print("         first token of step   last token of step (ms)")
    print("streams  lag P50   P99    lag P50   P90    P99    max   tokens/s  server CPU  µs CPU/token")
    for n in (int(x) for x in a.streams.split(",")):
        r = asyncio.run(_level(n, a.seconds, a.profile))
        print(
            f"{n:>7}  {r['first_p50_ms']:>6.2f} {r['first_p99_ms']:>6.2f}    "
            f"{r['lag_p50_ms']:>6.2f} {r['lag_p90_ms']:>6.2f} {r['lag_p99_ms']:>6.2f} "
            f"{r['lag_max_ms']:>6.2f}   {r['tokens_per_s']:>8.0f}  {r['server_cpu']:>9.0%}  "
            f"{r['cpu_us_per_token']:>10.1f}"
        )


if __name__ == "__main__":
    main()
