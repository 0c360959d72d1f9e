"""Use case: serve the simulated engine on the wall clock until SIGINT/SIGTERM (`tokenpace sim`).

The event loop is the app's (``run_loop``: uvloop when installed); the listening line is what
``SimProcess`` and the tests wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from tokenpace.app.run.run_loop import run_event_loop
from tokenpace.app.watch.heap import freeze_startup_heap
from tokenpace.sim.endpoints.faults import FaultConfig
from tokenpace.sim.profiles.profile import Network, Profile
from tokenpace.wire.descriptors import reserve_descriptors

SIM_CONNECTIONS_AHEAD = 4096  # client connections the served simulator makes room for at start


class SimRefused(Exception):
    """The simulator cannot serve as asked (the port is taken, ...)."""


def _to_stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def serve_sim(
    profile: Profile,
    network: Network,
    faults: FaultConfig,
    host: str,
    port: int,
    seed: int,
    otlp_endpoint: str | None = None,
    say: Callable[[str], None] = _to_stdout,
    worker: int | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (engine spans to ``otlp_endpoint`` when given); raises SimRefused
    before listening. ``worker``: this process is one of several sharing the port (sim_workers.py)."""
    run_event_loop(_serve(profile, network, faults, host, port, seed, otlp_endpoint, say, worker))


async def _serve(
    profile: Profile,
    network: Network,
    faults: FaultConfig,
    host: str,
    port: int,
    seed: int,
    otlp_endpoint: str | None,
    say: Callable[[str], None],
    worker: int | None = None,
) -> None:
    from tokenpace.adapters.otlp import MissingExtra
    from tokenpace.sim.endpoints.server import SimServer

    srv = SimServer(
        profile, host=host, port=port, faults=faults, network=network, seed=seed, otlp_endpoint=otlp_endpoint,
        worker=worker,
    )  # fmt: skip
    try:
        await srv.start()
    except OSError as e:
        raise SimRefused(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    except MissingExtra as e:
        raise SimRefused(str(e)) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    freeze_startup_heap()  # the engine's own timing is the truth: no full collection walks start-up
    reserve_descriptors(SIM_CONNECTIONS_AHEAD)  # a burst of clients grows no fd table mid-step
    say(f"tokenpace sim listening on {srv.url}")
    await stop.wait()
    await srv.stop()
