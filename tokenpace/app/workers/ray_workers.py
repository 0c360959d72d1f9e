"""``--ray ADDRESS|auto``: the worker processes as Ray actors, so load can come from several
machines. Ray is an optional extra (``pip install 'tokenpace[ray]'``); without it the flag says so
before any load.

Each actor runs the very worker of ``app.worker_proc`` (same schedule share, same messages): it
connects back to this process over TCP, says hello with the run's token, and from then on the run
is ``WorkerRun``'s. A worker on another machine has its own monotonic clock: the parent measures
its offset (``WorkerLink.measure_clock``), gives it the start time on its clock and moves its
records onto the parent's; every latency is a difference within one worker's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import logging
import os
import secrets
import socket
from typing import Any

from tokenpace.app.watch.preflight import PreflightError
from tokenpace.app.workers.worker_lost import WorkerLink, WorkerStartError
from tokenpace.app.workers.worker_pipe import FrameReader, send_frame
from tokenpace.app.workers.worker_proc import WorkerSpec, worker_main
from tokenpace.app.workers.workers import WorkerRun, usable_cores

RAY_INSTALL = "pip install 'tokenpace[ray]'"
ACTORS_TIMEOUT_S = 120.0  # actors that have not connected by then are not coming (no free CPUs?)
LOCAL_OBJECT_STORE_BYTES = 80 * 1024 * 1024  # a local cluster for a run needs almost none


class RayUnavailableError(PreflightError):
    """--ray was asked for and cannot be honoured here."""


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def require_ray() -> None:
    """Before any load: Ray must be importable, or the user learns how to install it."""
    if not ray_installed():
        raise RayUnavailableError(f"--ray needs Ray, an optional extra: {RAY_INSTALL}")


def _ray() -> Any:
    return importlib.import_module("ray")


class RayWorkerActor:
    """The actor's body (made a Ray actor class when a run starts)."""

    def run(self, host: str, port: int, token: str, spec: WorkerSpec) -> None:
        sock = socket.create_connection((host, port), timeout=30)
        sock.settimeout(None)
        send_frame(sock, ("hello", (token, spec.worker, os.getpid())))
        worker_main(sock, spec)


class _ActorHandle:
    """What the parent needs of a worker, for a Ray actor (as ``multiprocessing.Process`` gives)."""

    def __init__(self, ray: Any, actor: Any, done_ref: Any) -> None:
        self.ray, self.actor, self.done_ref = ray, actor, done_ref
        self.pid: int | None = None
        self.exitcode: int | None = None

    def join(self, timeout: float | None = None) -> None:
        self.ray.wait([self.done_ref], timeout=timeout)

    def is_alive(self) -> bool:
        ready, _ = self.ray.wait([self.done_ref], timeout=0)
        return not ready

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.kill(self.actor)

    def exit_text(self) -> str:
        try:
            self.ray.get(self.done_ref, timeout=0)
        except Exception as exc:
            return f"Ray actor lost: {type(exc).__name__}"
        return "the Ray actor ended without reporting"


class RayWorkerRun(WorkerRun):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_method = "ray"
        self.kind = f"Ray actors (--ray {self.config.ray})"
        self._started_cluster = False

    async def run(self) -> Any:
        try:
            return await super().run()
        finally:
            if self._started_cluster:
                await asyncio.to_thread(_ray().shutdown)

    async def _start_workers(self, specs: list[WorkerSpec]) -> None:
        ray = _ray()
        address = self.config.ray or "auto"
        if not ray.is_initialized():
            await asyncio.to_thread(self._init, ray, address)
        host = "127.0.0.1" if self._started_cluster else ray.util.get_node_ip_address()
        token = secrets.token_hex(16)
        with socket.create_server((host, 0), backlog=len(specs) + 8) as server:
            server.setblocking(False)
            port = server.getsockname()[1]
            actor_class = ray.remote(num_cpus=1)(RayWorkerActor)
            handles = {}
            for spec in specs:
                actor = actor_class.remote()
                ref = actor.run.remote(host, port, token, dataclasses.replace(spec, core=None))
                handles[spec.worker] = _ActorHandle(ray, actor, ref)
            try:
                await asyncio.wait_for(self._accept(server, token, specs, handles), ACTORS_TIMEOUT_S)
            except asyncio.TimeoutError:
                for handle in handles.values():
                    handle.kill()
                cpus = ray.cluster_resources().get("CPU", 0)
                raise WorkerStartError(
                    f"--ray: {len(specs) - len(self.links)} of {len(specs)} actors did not connect within "
                    f"{ACTORS_TIMEOUT_S:.0f} s (the cluster has {cpus:g} CPUs; each actor asks for one)"
                ) from None
        self.links.sort(key=lambda link: link.spec.worker)

    def _init(self, ray: Any, address: str) -> None:
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        if address != "auto":
            ray.init(address=address, **quiet)
            return
        try:
            ray.init(address="auto", **quiet)  # a cluster already running on this machine
        except (ConnectionError, RuntimeError):
            ray.init(
                address="local",
                num_cpus=max(self.count, len(usable_cores())),
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **quiet,
            )
            self._started_cluster = True

    async def _accept(
        self, server: socket.socket, token: str, specs: list[WorkerSpec], handles: dict[int, _ActorHandle]
    ) -> None:
        loop = asyncio.get_running_loop()
        while len(self.links) < len(specs):
            sock, _ = await loop.sock_accept(server)
            reader = FrameReader(sock.fileno())
            hello = await _first_frame(loop, sock, reader)
            if hello is None or hello[0] != "hello" or hello[1][0] != token:
                sock.close()  # not one of this run's actors
                continue
            _, worker, pid = hello[1]
            handle = handles[worker]
            handle.pid = pid
            link = WorkerLink(specs[worker], handle, sock, loop, self._received, reader)
            self.links.append(link)
            loop.add_reader(sock.fileno(), link.on_readable)
            loop.call_soon(link.on_readable)  # messages that came with the hello


async def _first_frame(loop: asyncio.AbstractEventLoop, sock: socket.socket, reader: FrameReader) -> Any:
    """The first message on a new connection (None if it closes first), leaving later ones buffered."""
    while True:
        messages = reader.read()
        if messages is None:
            return None
        if messages:
            reader.pending = messages[1:]
            return messages[0]
        readable = loop.create_future()
        loop.add_reader(sock.fileno(), readable.set_result, None)
        try:
            await readable
        finally:
            loop.remove_reader(sock.fileno())
