"""The run store: every run with its conditions, summary and records, in SQLite or PostgreSQL.

Callers see the ``Store`` protocol (``protocol``) and get one from ``connect(url)``. The SQL
implementation is one schema through SQLAlchemy Core, versioned (see ``migrations``), so a store
written by an older tokenpace opens after an upgrade.
"""

from tokenpace.adapters.store.protocol import (
    BaselineInfo,
    FleetState,
    LiveRun,
    RunInfo,
    RunPage,
    RunQuery,
    Store,
)
from tokenpace.adapters.store.query import parse_where
from tokenpace.adapters.store.store import SqlStore
from tokenpace.adapters.store.url import StoreError, default_store_url, normalize_url, redact, sqlite_path


def connect(url: str) -> Store:
    """Open (and migrate) the store at ``url``: ``sqlite:///PATH`` or a PostgreSQL URL."""
    return SqlStore.open(url)


__all__ = [
    "BaselineInfo",
    "FleetState",
    "LiveRun",
    "RunInfo",
    "RunPage",
    "RunQuery",
    "SqlStore",
    "Store",
    "StoreError",
    "connect",
    "default_store_url",
    "normalize_url",
    "parse_where",
    "redact",
    "sqlite_path",
]
