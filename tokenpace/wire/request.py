"""The one request-head builder: request line, Host and the caller's headers, as bytes. The client
builds a head once per run and adds each request's own lines; the gateway builds one per request."""

from __future__ import annotations

from collections.abc import Iterable


def request_head(method: str, target: str, host: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """``METHOD target HTTP/1.1``, ``Host`` and ``headers``, each line ended by CRLF; no blank line
    yet (``request_bytes`` ends the head)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers), ""]
    # UTF-8, with any byte that arrived as a lone surrogate (obs-text a proxied client sent, decoded
    # by aiohttp with surrogateescape) written back as that byte: forwarded unchanged, never a 500.
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


def request_bytes(head: bytes, body: bytes | None) -> bytes:
    """The whole request: ``head``, a Content-Length when there is a body (``b""`` included: a POST
    says its empty length), the blank line, the body."""
    if body is None:
        return head + b"\r\n"
    return b"%bContent-Length: %d\r\n\r\n%b" % (head, len(body), body)
