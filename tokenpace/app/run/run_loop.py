"""The event loop a run measures on (uvloop when installed), and Ctrl-C/SIGTERM as a clean stop:
the run ends early and keeps what it measured."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tokenpace.app.run.outputs import SIGTERM_STOP, USER_STOP

T = TypeVar("T")


def run_event_loop(main: Coroutine[Any, Any, T], prefer_uvloop: bool = True) -> T:
    """Run ``main`` to the end on a fresh loop; uvloop's when available and preferred."""
    if prefer_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def stop_on_signals(stop: Callable[[str], None]) -> None:
    """On the running loop: SIGINT and SIGTERM call ``stop(reason)`` instead of raising (where the
    platform and thread allow; elsewhere they keep their default). The reason tells the two apart:
    Ctrl-C exits 130, SIGTERM (a CI job's timeout, ``kill``) 143."""
    loop = asyncio.get_running_loop()
    for sig, reason in ((signal.SIGINT, USER_STOP), (signal.SIGTERM, SIGTERM_STOP)):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop, reason)
