"""Output files that never replace what is not ours: a device, a pipe, a folder.

A result is written to a temporary file in the same folder and renamed over its path, so a reader
never sees half a file; but a rename over ``/dev/full`` (run as root) would replace the device
node with a regular file. So an output path must be new or a regular file, and its folder must be
writable: both are checked before any load, and again when writing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import IO


class OutputPathError(OSError):
    """The path cannot take an output; the message (``str()``) is one line for the user. An OSError,
    so that every command already turning file errors into one line handles it too."""


def check_output(path: Path, flag: str = "") -> None:
    """Refuse ``path`` unless it is new or a regular file in a folder we can write (created when
    missing). Call it before any load: a run must not end with nowhere to put its results."""
    _check_kind(path, flag)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tokenpace-probe-"):
            pass
    except OSError as exc:
        raise OutputPathError(f"{_name(flag)}{folder} is not writable: {exc.strerror or exc}") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    _check_kind(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_stream(path: Path) -> IO[bytes]:
    """A new (or truncated) regular file for lines written as they come (records as they finish)."""
    _check_kind(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")


def _check_kind(path: Path, flag: str = "") -> None:
    try:
        mode = os.stat(path).st_mode  # follows links: a link to /dev/full is refused too
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputPathError(f"{_name(flag)}cannot use {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise OutputPathError(f"{_name(flag)}{path} exists and is not a regular file: refused")


def _mode_for(path: Path) -> int:
    """The mode of the file being replaced, else what a plain open() would give (0666 less umask)."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _name(flag: str) -> str:
    return f"{flag}: " if flag else ""
