"""The benchmark client's keep-alive HTTP/1.1 connection: the shared kernel (tokenpace.http1.client),
which timestamps bytes on arrival before parsing, driving a tokenpace.client.exchange.Exchange."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenpace.http1.client import ResponseConnection

if TYPE_CHECKING:
    from tokenpace.client.exchange import Exchange


class HttpConnection(ResponseConnection):
    __slots__ = ()
    exchange: Exchange | None

    def close(self) -> None:
        """No graceful close: the request is over either way."""
        self.abort()
