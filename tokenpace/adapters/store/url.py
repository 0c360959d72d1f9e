"""Where the store lives: a SQLite file by default, or any SQLAlchemy URL for SQLite or PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

ENV_VAR = "TOKENPACE_STORE"


class StoreError(Exception):
    """The store cannot be opened, read or written; the message is meant for the user."""


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tokenpace" / "runs.db"


def default_store_url() -> str:
    """``$TOKENPACE_STORE`` when set, else the SQLite file ``~/.local/share/tokenpace/runs.db``."""
    return os.environ.get(ENV_VAR) or f"sqlite:///{default_store_path()}"


def normalize_url(url: str) -> str:
    """A SQLAlchemy URL for ``url``: a plain path means SQLite; postgresql:// uses psycopg 3."""
    url = url.strip()
    if not url:
        raise StoreError("empty store URL")
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    scheme, rest = url.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        url = f"postgresql+psycopg://{rest}"
    elif not (scheme == "sqlite" or scheme.startswith("sqlite+") or scheme == "postgresql+psycopg"):
        raise StoreError(
            f"unsupported store URL {redact(url)!r}: use a file path, sqlite:///PATH or postgresql://..."
        )
    try:
        make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"bad store URL {redact(url)!r}: {exc}") from None
    return url


def missing_driver(url: str, exc: ImportError) -> str:
    """The message for a store whose database driver is not installed (psycopg is an optional extra)."""
    if make_url(url).get_backend_name() == "postgresql":
        return f"{redact(url)}: PostgreSQL stores need psycopg: pip install 'tokenpace[postgres]'"
    return f"cannot open the store {redact(url)}: {exc}"


def describe_error(exc: BaseException) -> str:
    """A driver's error in one line (its first), for a StoreError's message."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def redact(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for memory databases and other backends)."""
    u = make_url(url)
    if not u.drivername.startswith("sqlite") or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)
