"""Live configuration changes of a running gateway: re-read the file (SIGHUP, ``POST
/tokenpace/config``) or move the split (``POST /tokenpace/config {"weights": ...}``), checked as a
start would check it and applied as a whole, or refused as a whole with every reason.

Applying is one synchronous swap on the event loop (no await inside it): the request path reads
``gateway.config``, ``gateway.router`` and the upstream's pool once per request, so a request is
routed wholly under one config. Streams in flight keep the upstream and the connection they have:
a removed upstream's pool is retired (its idle connections closed, the busy ones closed as their
streams end), never cut. Each applied change is a new epoch: records made after it carry
``config_epoch``, /metrics carries it on every sample, and the change itself (who, when, before,
after) goes to the store with the records, in order.

Weights set through the admin surface (``arms --apply``) hold until the gateway restarts: a later
re-read of the file keeps them for the arms still there (the answer and the log say so).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from tokenpace.core.events import ConfigChange
from tokenpace.gateway.config.config import GatewayConfig, upstream_pool
from tokenpace.gateway.config.live import (
    ChangeResult,
    LiveChange,
    changed_keys,
    describe,
    fixed_changes,
    with_weights,
)
from tokenpace.gateway.experiments.mirror import Mirrors
from tokenpace.gateway.request_path.proxy import Gateway
from tokenpace.wire.pool import Pool

PROBE_EVERY_S = 0.5  # readiness: how often an upstream not yet heard from is tried
PROBE_TIMEOUT_S = 2.0


class Reloader:
    def __init__(
        self,
        gw: Gateway,
        load: Callable[[], GatewayConfig] | None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.gw = gw
        self.load = load  # the configuration file read again, as at start (ValueError: its problems)
        self.say = say or (lambda _line: None)
        self.epoch = 0
        self.overrides: dict[str, float] = {}  # arm -> weight set live, kept over a re-read file
        self.shared = False  # a fleet's changes are stored as they are agreed (fleet_sync.py)
        self._lock = asyncio.Lock()  # one change at a time
        self._tasks: set[asyncio.Task[Any]] = set()  # SIGHUP's reloads, old mirrors closing

    def current(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "weights_set_live": dict(self.overrides), **describe(self.gw.config)}

    def spawn(self, who: str) -> None:
        """A reload from a signal handler: run as a task, its result logged."""
        self._keep(asyncio.get_running_loop().create_task(self.reload(who)))

    async def reload(self, who: str) -> ChangeResult:
        async with self._lock:
            if self.load is None:
                return self._refuse(who, ["no configuration file to re-read (start with --config FILE)"])
            try:
                new = await asyncio.to_thread(self.load)
            except ValueError as exc:
                return self._refuse(who, list(getattr(exc, "errors", None) or [str(exc)]))
            except Exception as exc:  # a file that cannot be read as expected: refused, never a crash
                return self._refuse(who, [f"the configuration could not be read ({type(exc).__name__})"])
            if self.overrides:
                arms = {u.arm for u in new.upstreams}
                kept = {a: w for a, w in self.overrides.items() if a in arms}
                try:
                    new = with_weights(new, kept)
                except ValueError as exc:
                    return self._refuse(who, [f"with the weights set live ({kept}): {exc}"])
                self.overrides = kept
            return await self._apply(new, who)

    async def set_weights(self, weights: Mapping[str, float], who: str) -> ChangeResult:
        async with self._lock:
            try:
                new = with_weights(self.gw.config, weights)
            except ValueError as exc:
                return self._refuse(who, [str(exc)])
            before = dict(self.overrides)
            self.overrides.update({a: float(w) for a, w in weights.items()})
            result = await self._apply(new, who)
            if result.refused:
                self.overrides = before
            return result

    def _refuse(self, who: str, problems: list[str]) -> ChangeResult:
        result = ChangeResult(False, self.epoch, errors=tuple(problems), current=self.current())
        self.say(result.line(who))
        return result

    async def commit(self, new: GatewayConfig, event: ConfigChange) -> str | None:
        """Where the change is agreed before it runs here (a fleet's store: fleet_sync.py); the
        reason it was not, else None. Alone, nothing to agree with."""
        return None

    async def _apply(self, new: GatewayConfig, who: str) -> ChangeResult:
        old = self.gw.config
        problems = fixed_changes(old, new)
        if old.workers > 1 and not problems:
            problems.append("a live change with --workers > 1 is not supported yet: restart the gateway")
        if problems:
            return self._refuse(who, problems)
        changed = changed_keys(old, new)
        if not changed:
            return ChangeResult(False, self.epoch, current=self.current())
        event = ConfigChange("", self.epoch + 1, time.time(), who, changed, describe(old), describe(new))
        lost = await self.commit(new, event)
        if lost is not None:
            return self._refuse(who, [lost])
        self.run(new, event)
        result = ChangeResult(True, self.epoch, changed, current=self.current())
        self.say(result.line(who))
        return result

    def run(self, new: GatewayConfig, event: ConfigChange, stored: bool = False) -> None:
        """Swap to ``new`` as ``event.epoch`` (synchronous); the change goes with the records, in
        order, never dropped (``stored``: its row is in the store already, only its config is kept)."""
        self.epoch = event.epoch
        closing = swap(self.gw, new, self.epoch)
        if closing is not None:
            self._keep(asyncio.get_running_loop().create_task(closing.retire()))
        self.gw.sink.put(LiveChange(event, new, stored or self.shared))

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def swap(gw: Gateway, new: GatewayConfig, epoch: int) -> Mirrors | None:
    """Put ``new`` in effect at once (synchronous: no request sees half of it). Returns the old
    mirrors when they were replaced (to be closed by the caller), else None."""
    gw.router = gw.router.after_change(new.upstreams)
    wanted = {u.name: u for u in new.upstreams}
    for name, pool in list(gw.origins.items()):
        if name not in wanted or pool.endpoint.url != wanted[name].endpoint.url:
            retire(gw.origins.pop(name))
    for name, up in wanted.items():
        if name not in gw.origins:
            gw.origins[name] = upstream_pool(up.endpoint)
    gw.models.reserve({u.model for u in new.upstreams if u.model})
    gw.metrics.redraw(new.slo)  # the buckets follow the SLOs: every bound a new rule names exported
    gw.new_record.static, gw.new_record.epoch = new.static_labels, str(epoch)
    gw.admin.static_labels, gw.admin.epoch = dict(new.static_labels), str(epoch)
    old_mirrors = None
    if new.mirrors != gw.config.mirrors or new.connect_timeout_s != gw.config.connect_timeout_s:
        old_mirrors = gw.mirrors
        emit = gw.shadow_metrics.emitter(gw.sink.put, gw.on_record)
        gw.mirrors = Mirrors.of(new, emit, gw.shadow_metrics.drop)
        if gw.mirrors is not None:
            gw.mirrors.start()
    elif gw.mirrors is not None:
        gw.mirrors.static_labels = new.static_labels
    if gw.mirrors is not None:  # their shadow records belong to the new epoch's runs
        gw.mirrors.epoch = str(epoch)
    gw.config, gw.secrets = new, new.secrets
    return old_mirrors


def retire(pool: Pool) -> None:
    """No new request uses it: its idle connections close now, each busy one when its stream ends."""
    pool.closing = True
    for conn in pool.idle:
        conn.close()
        pool.open.discard(conn)
    pool.idle.clear()


async def probe_upstreams(gw: Gateway) -> None:
    """Readiness: try each upstream not yet heard from (a TCP connection) until all have answered."""
    readiness = gw.control.readiness
    while readiness.waiting:
        for up in gw.config.upstreams:
            if up.name not in readiness.waiting:
                continue
            end = up.endpoint
            try:
                dial = asyncio.open_connection(end.host, end.port)
                _, writer = await asyncio.wait_for(dial, PROBE_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError):
                continue
            writer.close()
            readiness.answered(up.name)
        readiness.waiting &= {u.name for u in gw.config.upstreams}  # one removed since: not waited for
        if readiness.waiting:
            await asyncio.sleep(PROBE_EVERY_S)
