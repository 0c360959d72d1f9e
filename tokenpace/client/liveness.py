"""Is an idle keep-alive connection still open? Asked of the kernel just before a request is written
to a reused connection, so that a request is never sent into a connection the server had already
closed (the one case where resending would be safe is then never needed)."""

from __future__ import annotations

import asyncio
import socket


def peer_has_closed(transport: asyncio.BaseTransport | None) -> bool:
    """True when the server closed (or reset) the connection: a non-blocking peek sees end-of-file
    or an error. One recv syscall; nothing is consumed. TLS transports are peeked at the TCP level,
    where a pending close_notify still reads as open: those fall to the send-time policy."""
    if transport is None or transport.is_closing():
        return True
    raw = transport.get_extra_info("socket")
    fd = raw.fileno() if raw is not None else -1
    if fd < 0:
        return False
    # A socket object over the loop's descriptor, released (never closed) after one peek.
    peek = socket.socket(raw.family, raw.type, 0, fileno=fd)
    try:
        return peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        peek.detach()
