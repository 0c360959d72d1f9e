"""Who may read the console: anyone on this machine when it listens on a loopback address; with an
access key (required on any other address) only a request that carries it, as a bearer header or
the cookie set once from ``?key=``. Only GET and HEAD are answered; every answer carries headers
that keep stored text from running as script (a content security policy with no inline script)."""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

from tokenpace.adapters.bounded_read import read_text

KEY_COOKIE = "tokenpace_console_key"
KEY_FILE_MAX = 4096  # bytes of an access key file
KEY_MIN = 16  # characters of an access key
READ_METHODS = ("GET", "HEAD")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


class ConsoleRefused(ValueError):
    """The console cannot start as asked: one line for the user."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_key(path: Path | str) -> str:
    """The access key: the file's first line, at least ``KEY_MIN`` characters."""
    try:
        text = read_text(path, KEY_FILE_MAX, "access key file")
    except OSError as exc:
        raise ConsoleRefused(f"--access-key-file {path}: {exc.strerror or exc}") from None
    key = (text.strip().splitlines() or [""])[0].strip()
    if len(key) < KEY_MIN:
        raise ConsoleRefused(f"--access-key-file {path}: the key must be at least {KEY_MIN} characters")
    return key


def check_listen(host: str, key: str | None) -> None:
    """Refuse to listen beyond this machine without a key."""
    if key is None and not is_loopback(host):
        raise ConsoleRefused(
            f"--listen {host}: any address other than 127.0.0.1 needs --access-key-file "
            "(a file holding a key of at least 16 characters)"
        )


def same_key(given: str | None, key: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


def bearer(header: str | None) -> str | None:
    if header and header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


def host_is_local(host_header: str | None) -> bool:
    """A Host header naming this machine: without a key, a page fetched through another name (DNS
    rebinding) is refused."""
    if not host_header:
        return False
    name = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    return is_loopback(name)
