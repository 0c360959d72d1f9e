"""What the kernel knows about a keep-alive connection, asked at the two moments a resend policy
needs it: just before a request is written to a reused connection (has the server already closed
it?), and when the server closes it without answering (did the server's TCP ever acknowledge the
request?). Data a server's TCP never acknowledged was never delivered to the server, so the server
provably did not read it: only such a request is resent by default."""

from __future__ import annotations

import asyncio
import socket
import struct

_TCP_INFO = getattr(socket, "TCP_INFO", None)  # Linux
_ESTABLISHED = 1  # tcp_info.tcpi_state
_BYTES_ACKED_AT = 120  # offset of tcp_info.tcpi_bytes_acked (Linux 4.1+)
_INFO_LEN = 128


def _tcp_info(transport: asyncio.BaseTransport | None) -> tuple[int, int] | None:
    """(state, bytes acknowledged by the peer) of the transport's TCP socket; None where unknown.
    A socket that is not TCP (a test's Unix socket) refuses TCP_INFO: None too. (No check of
    ``raw.type`` first: on uvloop each read of it builds an enum, twice per reused request.)"""
    if _TCP_INFO is None or transport is None:
        return None
    raw = transport.get_extra_info("socket")
    if raw is None:
        return None
    try:
        info = raw.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_LEN)
    except OSError:
        return None
    if len(info) < _BYTES_ACKED_AT + 8:
        return None
    return info[0], struct.unpack_from("=Q", info, _BYTES_ACKED_AT)[0]


def acked_bytes(transport: asyncio.BaseTransport | None) -> int | None:
    """Bytes of this connection the server's TCP has acknowledged so far (None: not known here)."""
    info = _tcp_info(transport)
    return None if info is None else info[1]


def look_before_send(transport: asyncio.BaseTransport | None) -> tuple[bool, int | None]:
    """Just before a request is written to a reused connection: (has the server closed it, bytes
    of this connection its TCP has acknowledged so far), from one TCP_INFO read."""
    if transport is None or transport.is_closing():
        return True, None
    info = _tcp_info(transport)
    if info is not None:
        return info[0] != _ESTABLISHED, info[1]
    return _peeked_eof(transport), None


def peer_has_closed(transport: asyncio.BaseTransport | None) -> bool:
    """True when the server closed (or reset) the connection: the TCP state left ESTABLISHED, or,
    where TCP_INFO is missing, a non-blocking peek sees end-of-file. Nothing is consumed."""
    return look_before_send(transport)[0]


def _peeked_eof(transport: asyncio.BaseTransport) -> bool:
    raw = transport.get_extra_info("socket")
    fd = raw.fileno() if raw is not None else -1
    if fd < 0:
        return False
    peek = socket.socket(raw.family, raw.type, 0, fileno=fd)  # released, never closed, below
    try:
        return peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        peek.detach()
