"""A keep-alive HTTP/1.1 connection: the shared kernel (tokenpace.wire.http1.client), which timestamps
bytes on arrival before parsing, driving whatever exchange is in flight (the client's measuring one).
It also notes how much of what it sent the server's TCP had acknowledged when the server closed it,
which is what tells a request the server never received from one it may have read."""

from __future__ import annotations

from tokenpace.wire.http1.client import ResponseConnection
from tokenpace.wire.liveness import acked_bytes


class HttpConnection(ResponseConnection):
    __slots__ = ("acked_at_close", "acked_before_send", "reason")

    def __init__(self) -> None:
        super().__init__()
        self.reason = b""  # the last response's reason phrase (the gateway passes it on)
        self.acked_before_send: int | None = None  # set by the pool's look before reuse
        self.acked_at_close: int | None = None

    def on_message_begin(self) -> None:
        self.reason = b""

    def on_status(self, status: bytes) -> None:
        self.reason += status  # httptools may hand it over in pieces

    def eof_received(self) -> bool | None:
        # The server's FIN: read the acknowledgement count while the socket is still open.
        self.acked_at_close = acked_bytes(self.transport)
        return super().eof_received()

    def mark_send(self, acked: int | None) -> None:
        """Before a request is written: what the server's TCP had acknowledged until now (``acked``,
        read by the pool's look at the connection, ``tokenpace.wire.liveness.look_before_send``)."""
        self.acked_before_send = acked
        self.acked_at_close = None

    @property
    def request_never_delivered(self) -> bool:
        """The server closed this connection before its TCP acknowledged any byte of the request
        written since ``mark_send``: the server cannot have read it."""
        before, after = self.acked_before_send, self.acked_at_close
        return before is not None and after is not None and after <= before

    def close(self) -> None:
        """No graceful close: the request is over either way."""
        self.abort()
