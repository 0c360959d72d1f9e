"""A gateway fleet's desired configuration in the run store (table ``fleet_configs``): the SQL, and
the methods ``SqlStore`` takes from ``FleetConfigs``.

One row per fleet name. Its epoch only grows: a change is written where the row still holds the
epoch just below it (compare-and-set), so of two changes made at once on the same epoch one wins
and the other is told it lost. The change's ``ConfigChange`` row goes in the same transaction.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from tokenpace.adapters.store import events as ev
from tokenpace.adapters.store import schema as s
from tokenpace.adapters.store.protocol import FleetState
from tokenpace.core.events import ConfigChange


def _state(row: Any) -> FleetState:
    return FleetState(row.fleet, int(row.epoch), float(row.unix_s), dict(row.desired))


def _insert_absent(conn: sa.Connection, row: dict[str, Any]) -> None:
    """INSERT that does nothing where the fleet has a row already (a replica started beside us)."""
    t = s.fleet_configs
    if conn.dialect.name == "postgresql":
        conn.execute(postgresql.insert(t).values(row).on_conflict_do_nothing(index_elements=["fleet"]))
    elif conn.dialect.name == "sqlite":
        conn.execute(sqlite.insert(t).values(row).on_conflict_do_nothing(index_elements=["fleet"]))
    else:  # another dialect: a plain insert (a race raises, and the start is retried by its operator)
        if conn.execute(sa.select(t.c.fleet).where(t.c.fleet == row["fleet"])).first() is None:
            conn.execute(sa.insert(t).values(row))


class FleetConfigs:
    """Mixed into ``SqlStore``, which provides the transaction."""

    def _tx(self, what: str) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def join_fleet(self, fleet: str, desired: dict[str, Any]) -> FleetState:
        """The fleet's desired configuration; ``desired`` as its epoch 0 where it has none yet."""
        t = s.fleet_configs
        with self._tx(f"join fleet {fleet}") as conn:
            _insert_absent(conn, {"fleet": fleet, "epoch": 0, "unix_s": time.time(), "desired": desired})
            return _state(conn.execute(sa.select(t).where(t.c.fleet == fleet)).one())

    def fleet_epoch(self, fleet: str) -> int | None:
        """The fleet's current epoch (one small query: what replicas poll), None for no such fleet."""
        t = s.fleet_configs
        with self._tx(f"read fleet {fleet}") as conn:
            value = conn.execute(sa.select(t.c.epoch).where(t.c.fleet == fleet)).scalar()
            return None if value is None else int(value)

    def fleet_config(self, fleet: str) -> FleetState | None:
        t = s.fleet_configs
        with self._tx(f"read fleet {fleet}") as conn:
            row = conn.execute(sa.select(t).where(t.c.fleet == fleet)).first()
            return None if row is None else _state(row)

    def set_fleet_config(self, fleet: str, desired: dict[str, Any], change: ConfigChange) -> bool:
        """Make ``desired`` the fleet's configuration at ``change.epoch`` if the fleet is still at
        the epoch below it, and store the change beside it; False (nothing written) where another
        change came first."""
        t = s.fleet_configs
        with self._tx(f"change fleet {fleet}") as conn:
            moved = conn.execute(
                sa.update(t)
                .where(t.c.fleet == fleet, t.c.epoch == change.epoch - 1)
                .values(epoch=change.epoch, unix_s=change.unix_s, desired=desired)
            )
            if moved.rowcount != 1:
                return False
            ev.insert_config_change(conn, change)
            return True
