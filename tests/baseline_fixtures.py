"""Fixtures for the baseline-library tests: a throwaway PostgreSQL server, store URLs for both
backends, a scripted server on a background thread (for CLI subprocesses), hand-made records."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenpace.core.record import RequestRecord, Status
from tokenpace.testing.procs import free_port, run_cli
from tokenpace.testing.scripted_server import Script, ScriptedServer

ROOT = Path(__file__).resolve().parents[1]


# --- PostgreSQL ------------------------------------------------------------------------------


def _pg_bindir() -> Path | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return Path(d)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[int]:
    """A PostgreSQL server on 127.0.0.1 for this test session; yields its port."""
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries not installed (Debian package postgresql; make test installs it)"
        )
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="tokenpace-pg-"))
    if os.geteuid() == 0:  # the server refuses to run as root: run it as the postgres user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(base, ignore_errors=True)
            pytest.skip("running as root and there is no postgres user to run the server as")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=60)

    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "tokenpace", "--no-sync", "-E", "UTF8")
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    pg_ctl = str(bindir / "pg_ctl")
    run(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "30", "-o", opts, "start")
    try:
        yield port
    finally:
        with contextlib.suppress(Exception):
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


def new_pg_database(port: int) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"postgresql://tokenpace@127.0.0.1:{port}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"postgresql://tokenpace@127.0.0.1:{port}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return new_pg_database(request.getfixturevalue("pg_server"))


# --- a scripted server usable from another process --------------------------------------------


@contextlib.contextmanager
def served(default: Script, scripts: dict[str, Script] | None = None) -> Iterator[ScriptedServer]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ScriptedServer(default=default, scripts=scripts)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def tokenpace(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the CLI in a subprocess from the repository root (real signal handling, real exit codes)."""
    return run_cli(*args, env=env, timeout=timeout, cwd=str(ROOT))


# --- hand-made records -------------------------------------------------------------------------


def make_record(
    i: int,
    ttft_ms: float,
    itl_ms: float = 10.0,
    tokens: int = 8,
    status: Status = Status.OK,
    warmup: bool = False,
) -> RequestRecord:
    """A streamed request sent at t=1 s: first token after ttft_ms, then one chunk every itl_ms."""
    sent = 1_000_000_000
    first = sent + round(ttft_ms * 1e6)
    chunks = [first + round(k * itl_ms * 1e6) for k in range(tokens)]
    return RequestRecord(
        request_id=f"r{i}",
        index=i,
        warmup=warmup,
        scheduled_ns=sent,
        dispatched_ns=sent,
        sent_ns=sent,
        first_token_ns=first if status is Status.OK else None,
        token_ns=chunks if status is Status.OK else [],
        end_ns=chunks[-1],
        output_tokens_counted=tokens if status is Status.OK else 0,
        status=status,
    )
