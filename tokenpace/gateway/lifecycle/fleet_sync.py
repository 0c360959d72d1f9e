"""Replicas of one gateway that share a store share one desired configuration, and a config file
changed under a running gateway (a Kubernetes ConfigMap) is applied without a signal.

- ``FleetReloader``: a change (``POST /tokenpace/config``, ``arms --apply``, a re-read file) is
  written to the store first, compare-and-set on the fleet's epoch (its ``ConfigChange`` row in the
  same transaction), and runs here only once it won; a change that lost to another replica's is
  retried on top of it (``TRIES``). Every replica polls the fleet's epoch every ``POLL_S`` (one
  small query, in a thread: the loop never waits on SQL) and runs a newer one under the same epoch.
  A replica that starts takes the fleet's configuration, not its file's first one, unless its file
  differs from the one the fleet's was read from: then the file is applied on top, as a reload.
- ``watch_file``: the file's inode, size and mtime (through its symlinks) every ``WATCH_S``; a
  change of its content (SHA-256) re-reads it as SIGHUP would.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from tokenpace.adapters.store import FleetState, Store, StoreError
from tokenpace.core.events import ConfigChange
from tokenpace.gateway.config.config import GatewayConfig
from tokenpace.gateway.config.live import ChangeResult, changed_keys, describe, fixed_changes
from tokenpace.gateway.lifecycle.fleet_config import config_from, desired_of, file_hash, file_key
from tokenpace.gateway.lifecycle.reload import Reloader
from tokenpace.gateway.request_path.proxy import Gateway

POLL_S = 0.3  # a change reaches every replica within this plus one query and one swap
WATCH_S = 1.0  # a changed file is applied within this plus one read and one change
TRIES = 3  # a change that lost to another replica's is tried again on top of it, up to this often


@dataclasses.dataclass(frozen=True, slots=True)
class FleetLink:
    """Where the fleet's configuration lives and who this replica is."""

    store: Store
    fleet: str
    session: str  # this replica's gateway session (its stored runs)
    replica: str


class FleetReloader(Reloader):
    def __init__(
        self,
        gw: Gateway,
        load: Callable[[], GatewayConfig] | None,
        say: Callable[[str], None] | None,
        link: FleetLink,
        path: str | None,
    ) -> None:
        super().__init__(gw, load, say)
        self.link, self.path = link, path
        self.shared = True
        self.file_sha: str | None = None
        self.store_errors = 0
        self._lost = False
        self._skipped = -1  # an epoch that cannot run here (said once)

    def current(self) -> dict[str, Any]:
        return {**super().current(), "fleet": self.link.fleet, "replica": self.link.replica}

    async def join(self) -> None:
        """Before serving: the fleet's configuration (ours where the fleet is new), then the file's
        where it changed since the fleet's was read. StoreError: the store cannot be read."""
        self.file_sha = await asyncio.to_thread(file_hash, self.path)
        mine = desired_of(self.gw.config, {}, self.file_sha)
        state = await asyncio.to_thread(self.link.store.join_fleet, self.link.fleet, mine)
        if state.epoch != self.epoch or state.desired != mine:
            async with self._lock:
                self._take(state, at_start=True)
        if self.load is not None and state.desired.get("file_sha") != self.file_sha:
            await self.reload("start: the configuration file differs from the fleet's")

    async def follow(self) -> None:
        """Poll the fleet's epoch; run each newer configuration. A store that fails is said once
        per streak; the replica keeps serving what it runs."""
        failing = False
        while True:
            await asyncio.sleep(POLL_S)
            try:
                epoch = await asyncio.to_thread(self.link.store.fleet_epoch, self.link.fleet)
                if epoch is not None and epoch > self.epoch and epoch != self._skipped:
                    await self.catch_up()
            except Exception as exc:  # the store, or a stored configuration this version cannot run
                self.store_errors += 1
                if not failing:
                    name, epoch = self.link.fleet, self.epoch
                    self.say(f"fleet {name}: cannot read its configuration ({exc}); epoch {epoch} stays")
                failing = True
                continue
            failing = False

    async def catch_up(self) -> None:
        async with self._lock:
            state = await asyncio.to_thread(self.link.store.fleet_config, self.link.fleet)
            if state is not None and state.epoch > self.epoch:
                self._take(state)

    def _take(self, state: FleetState, at_start: bool = False) -> None:
        """Run the fleet's configuration here (synchronous, under the lock)."""
        old = self.gw.config
        try:
            new = config_from(old, state.desired)
            problems = fixed_changes(old, new)
        except ValueError as exc:
            problems = [str(exc)]
        if problems:
            if state.epoch != self._skipped:
                why = "; ".join(problems)
                self.say(f"fleet {self.link.fleet}: epoch {state.epoch} cannot run here: {why}")
            self._skipped = state.epoch
            return
        who = f"fleet {self.link.fleet}" + (" (at start)" if at_start else "")
        changed = changed_keys(old, new)
        event = ConfigChange("", state.epoch, state.unix_s, who, changed, describe(old), describe(new))
        self.overrides = {str(a): float(w) for a, w in state.desired.get("weights_set_live", {}).items()}
        self.run(new, event, stored=True)
        self.say(f"{who}: epoch {state.epoch} runs here ({', '.join(changed) or 'as it was'})")

    async def commit(self, new: GatewayConfig, event: ConfigChange) -> str | None:
        doc = desired_of(new, self.overrides, self.file_sha)
        change = dataclasses.replace(event, session=self.link.session)
        try:
            won = await asyncio.to_thread(self.link.store.set_fleet_config, self.link.fleet, doc, change)
        except StoreError as exc:
            return f"the fleet's store cannot be written ({exc}): nothing changed"
        if not won:
            self._lost = True
            return f"another replica of fleet {self.link.fleet} changed its configuration first"
        return None

    async def reload(self, who: str) -> ChangeResult:
        async def once() -> ChangeResult:
            with contextlib.suppress(OSError):  # the load says why
                self.file_sha = await asyncio.to_thread(file_hash, self.path)
            return await Reloader.reload(self, who)

        return await self._tries(once)

    async def set_weights(self, weights: Mapping[str, float], who: str) -> ChangeResult:
        return await self._tries(lambda: Reloader.set_weights(self, weights, who))

    async def _tries(self, change: Callable[[], Any]) -> ChangeResult:
        for _ in range(TRIES):
            try:
                await self.catch_up()
            except StoreError as exc:
                return self._refuse("fleet", [f"the fleet's store cannot be read ({exc}): nothing changed"])
            self._lost = False
            result: ChangeResult = await change()
            if not self._lost:
                break
        return result


async def watch_file(path: str, reloader: Reloader, first: Any, every_s: float = WATCH_S) -> None:
    """Re-read the configuration file when its content changes from ``first`` (``_look``'s, taken
    before serving: a change made as the gateway starts is not missed)."""
    key, sha = first
    while True:
        await asyncio.sleep(every_s)
        try:
            new_key, new_sha = await asyncio.to_thread(_look, path, key, sha)
        except OSError:  # replaced right now, or gone: looked at again next turn
            continue
        if new_sha != sha:
            await reloader.reload(f"the configuration file changed ({path})")
        key, sha = new_key, new_sha


def _look(path: str, key: Any, sha: str | None) -> tuple[Any, str | None]:
    """(the file's key, its hash): read only where the key moved."""
    try:
        now = file_key(path)
    except OSError:
        if key is None:
            return None, None
        raise
    return now, sha if now == key else file_hash(path)


@dataclasses.dataclass(frozen=True, slots=True)
class Follow:
    """What a gateway follows beside signals: its configuration file, and its fleet's store."""

    path: str | None = None  # watched for changes (None: not watched)
    link: FleetLink | None = None

    def reloader(
        self, gw: Gateway, load: Callable[[], GatewayConfig] | None, say: Callable[[str], None] | None
    ) -> Reloader:
        if self.link is None:
            return Reloader(gw, load, say)
        return FleetReloader(gw, load, say, self.link, self.path)

    async def begin(self, reloader: Reloader) -> None:
        """Before serving: join the fleet; then the polling and the watching, as the reloader's
        tasks (cancelled when it closes)."""
        loop = asyncio.get_running_loop()
        watched = self.path if reloader.load is not None else None
        first = await asyncio.to_thread(_look, watched, None, None) if watched else None
        if isinstance(reloader, FleetReloader):
            try:
                await reloader.join()
            except StoreError as exc:  # said in one line by the caller, before listening
                raise RuntimeError(f"fleet {reloader.link.fleet}: {exc}") from None
            reloader._keep(loop.create_task(reloader.follow()))
        if watched:
            reloader._keep(loop.create_task(watch_file(watched, reloader, first)))
