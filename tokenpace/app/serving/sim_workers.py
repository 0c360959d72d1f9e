"""``tokenpace sim --workers N``: the served simulator in N processes sharing one port, so the project's
own target is not the bottleneck of a client that scales past one core.

One engine state per process: each worker is a whole simulated engine (its own scheduler, KV cache
and /metrics) with its own event loop, all listening on the same port with SO_REUSEPORT; the kernel
spreads new connections over them. So N workers are N engine replicas behind a connection-hashing
balancer (as `sim --virtual --replicas N` is behind a random router), not one engine N times as
fast: a load's TTFT and TPOT are those of one replica at its share of the load. Every answer carries
``x-tokenpace-sim-worker: I``. Each worker's /metrics is its own engine's (a scrape lands on one).
Worker I draws from seed + I, so replicas differ as real ones do.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from tokenpace.app.serving.sim_serving import SimRefused, serve_sim
from tokenpace.sim.endpoints.faults import FaultConfig
from tokenpace.sim.profiles.profile import Network, Profile

MAX_SIM_WORKERS = 256
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def _worker(args: tuple[Any, ...], ready: multiprocessing.Queue[Any]) -> None:
    profile, network, faults, host, port, seed, otlp, index = args
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers with SIGTERM

    def say(line: str) -> None:
        ready.put(("listening", index, line))

    try:
        serve_sim(profile, network, faults, host, port, seed + index, otlp, say=say, worker=index)
    except SimRefused as e:
        ready.put(("refused", index, str(e)))


def serve_sim_workers(
    profile: Profile,
    network: Network,
    faults: FaultConfig,
    host: str,
    port: int,
    seed: int,
    workers: int,
    otlp_endpoint: str | None = None,
    say: Callable[[str], None] = print,
) -> None:
    """Start ``workers`` engine processes on one port, say where once all listen, and stop them all on
    SIGINT/SIGTERM or when one dies; SimRefused (one line) when they cannot start."""
    if not 1 <= workers <= MAX_SIM_WORKERS:
        raise SimRefused(f"--workers {workers}: 1 to {MAX_SIM_WORKERS}")
    held = None
    if port == 0:  # one port for all: taken here, shared by every worker (SO_REUSEPORT)
        held = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            held.bind((host, 0))
        except OSError as e:
            raise SimRefused(f"cannot listen on {host}: {e.strerror or e}") from None
        port = held.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=((profile, network, faults, host, port, seed, otlp_endpoint, i), ready),
            name=f"tokenpace-sim-{i}",
        )
        for i in range(workers)
    ]
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for p in procs:
            p.start()
        _await_listening(procs, ready, workers)
        shown = f"[{host}]" if ":" in host else host
        say(f"tokenpace sim listening on http://{shown}:{port}/v1 ({workers} worker processes)")
        while not stopping and all(p.is_alive() for p in procs):
            time.sleep(0.2)
        dead = [p.name for p in procs if not p.is_alive()]
        if dead and not stopping:
            print(f"tokenpace sim: worker {', '.join(dead)} died: stopping the others", file=sys.stderr)
    finally:
        _stop(procs)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if held is not None:
            held.close()


def _await_listening(procs: list[Any], ready: multiprocessing.Queue[Any], workers: int) -> None:
    listening: set[int] = set()
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(listening) < workers:
        try:
            kind, index, text = ready.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            dead = [p.name for p in procs if not p.is_alive()]
            raise SimRefused(
                f"workers did not start within {START_TIMEOUT_S:.0f} s"
                + (f" ({', '.join(dead)} died)" if dead else "")
            ) from None
        if kind == "refused":
            raise SimRefused(f"worker {index}: {text}")
        listening.add(index)


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            with contextlib.suppress(ProcessLookupError):
                p.terminate()  # SIGTERM: each worker stops its server and exits
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)
