"""Schema versions and the steps between them. A store records its version in ``tokenpace_schema``;
opening it applies every later step in one transaction, so an old store opens after an upgrade.

A step must never change once released: a later change to a table is a new step (ALTER TABLE ...).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from tokenpace.adapters.store import schema
from tokenpace.adapters.store.url import StoreError


def _v1(conn: sa.Connection) -> None:
    for table in (schema.runs, schema.run_labels, schema.records):
        table.create(conn, checkfirst=True)


def _v2(conn: sa.Connection) -> None:
    schema.baselines.create(conn, checkfirst=True)


def _v3(conn: sa.Connection) -> None:
    schema.outcome_events.create(conn, checkfirst=True)


def _v4(conn: sa.Connection) -> None:
    for table in (schema.repeat_groups, schema.repeat_runs, schema.run_noise):
        table.create(conn, checkfirst=True)


def _v5(conn: sa.Connection) -> None:
    schema.config_changes.create(conn, checkfirst=True)


def _v6(conn: sa.Connection) -> None:
    schema.fleet_configs.create(conn, checkfirst=True)


def _v7(conn: sa.Connection) -> None:
    schema.live_runs.create(conn, checkfirst=True)


def _v8(conn: sa.Connection) -> None:
    schema.run_levels.create(conn, checkfirst=True)


STEPS: dict[int, Callable[[sa.Connection], None]] = {
    1: _v1, 2: _v2, 3: _v3, 4: _v4, 5: _v5, 6: _v6, 7: _v7, 8: _v8,
}  # fmt: skip
assert max(STEPS) == schema.SCHEMA_VERSION


MIGRATION_LOCK = 0x746F6B70  # the advisory lock's key: held to the end of the migrating transaction


def current_version(conn: sa.Connection) -> int:
    """0 for an empty database."""
    if not sa.inspect(conn).has_table(schema.schema_version.name):
        return 0
    value = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
    return int(value or 0)


def migrate(conn: sa.Connection, target: int = schema.SCHEMA_VERSION) -> int:
    """Bring the store to ``target``; returns the version found. Refuses a newer store. On
    PostgreSQL one opener at a time (replicas of a fleet start together on a new store)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    found = current_version(conn)
    if found > schema.SCHEMA_VERSION:
        raise StoreError(
            f"the store has schema version {found}, newer than this tokenpace understands "
            f"({schema.SCHEMA_VERSION}): upgrade tokenpace"
        )
    if found >= target:
        return found
    schema.schema_version.create(conn, checkfirst=True)
    for version in range(found + 1, target + 1):
        STEPS[version](conn)
    conn.execute(sa.delete(schema.schema_version))
    conn.execute(sa.insert(schema.schema_version).values(version=target))
    return found
