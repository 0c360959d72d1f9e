"""The run store: every run with its conditions, summary and records, in SQLite or PostgreSQL.

One schema through SQLAlchemy Core, versioned (see ``migrations``), so a store written by an older
tokenpace opens after an upgrade.
"""

from tokenpace.adapters.store.store import BaselineInfo, RunInfo, Store
from tokenpace.adapters.store.url import StoreError, default_store_url, normalize_url, redact

__all__ = [
    "BaselineInfo",
    "RunInfo",
    "Store",
    "StoreError",
    "default_store_url",
    "normalize_url",
    "redact",
]
