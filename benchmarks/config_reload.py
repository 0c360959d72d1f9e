"""How long a live configuration change takes to be in effect, with streams in flight.

One gateway (in this process) in front of two scripted upstreams on 127.0.0.1, ``--streams``
clients streaming through it without pause, and ``--changes`` changes of the split (alternating
weights), each made two ways in turn:

- ``POST /tokenpace/config`` (the file re-read through the same loader as SIGHUP's): the time from
  sending the POST to its answer, which comes once the new config is in effect (the swap is done
  before the answer is written);
- ``SIGHUP`` to this process (the real signal, the real handler): the time from the signal to the
  first ``GET /tokenpace/config`` showing the new epoch (polled every millisecond; an upper bound).

Printed: P50, P95 and the largest of each, the streams completed and cut. Wall-clock time on
whatever machine runs it: say how loaded it was.

    .venv/bin/python benchmarks/config_reload.py [--changes 40] [--streams 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import time

import aiohttp

from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

KEY = "benchmark-admin-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "stream": True}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def main(changes: int, streams: int) -> None:
    a = await ScriptedServer(Script(ttft_s=0.005, itl_s=0.005)).start()
    b = await ScriptedServer(Script(ttft_s=0.005, itl_s=0.005)).start()

    def config(weight_b: int) -> GatewayConfig:
        ups = (
            parse_upstream(f"a={a.url},weight={100 - weight_b}"),
            parse_upstream(f"b={b.url},weight={weight_b}"),
        )
        return GatewayConfig(upstreams=ups, port=0, admin_keys=frozenset({KEY}))

    want = [config(10)]
    gw = RunningGateway(want[0], load=lambda: want[0])
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, gw.reloader.spawn, "SIGHUP")  # as serve_forever does
    done, completed, cut = asyncio.Event(), [0], [0]
    posted, signalled = [], []
    async with gw, aiohttp.ClientSession() as s:

        async def client(i: int) -> None:
            while not done.is_set():
                async with s.post(
                    gw.url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": f"u{i}"}
                ) as r:
                    body = await r.read()
                completed[0] += 1
                cut[0] += not body.rstrip().endswith(b"[DONE]")

        tasks = [asyncio.create_task(client(i)) for i in range(streams)]
        await asyncio.sleep(0.5)
        for n in range(1, changes + 1):
            want[0] = config(10 + 40 * (n % 2))
            if n % 2:
                t0 = time.perf_counter()
                async with s.post(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                    assert r.status == 200 and (await r.json())["epoch"] == n
                posted.append(time.perf_counter() - t0)
            else:
                t0 = time.perf_counter()
                os.kill(os.getpid(), signal.SIGHUP)
                while True:
                    async with s.get(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
                        if (await r.json())["epoch"] == n:
                            break
                    await asyncio.sleep(0.001)
                signalled.append(time.perf_counter() - t0)
            await asyncio.sleep(0.1)
        done.set()
        await asyncio.gather(*tasks)
    await a.stop()
    await b.stop()
    for name, values in (("POST /tokenpace/config", posted), ("SIGHUP", signalled)):
        ms = [v * 1000 for v in values]
        print(
            f"{name}: {len(ms)} changes, applied in P50 {statistics.median(ms):.2f} ms, "
            f"P95 {_pct(ms, 95):.2f} ms, max {max(ms):.2f} ms"
        )
    print(f"streams: {completed[0]} completed, {cut[0]} cut, {streams} in flight throughout")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--streams", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.changes, args.streams))
