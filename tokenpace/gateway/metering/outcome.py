"""Who ended a proxied request, and how: a bounded set (a Prometheus label) mapped onto record statuses."""

from __future__ import annotations

from enum import Enum

from tokenpace.core.record import Status


class Outcome(str, Enum):
    OK = "ok"
    HTTP_ERROR = "http_error"  # the upstream answered with an error status
    CONNECT_ERROR = "connect_error"  # the upstream could not be reached (client got a 502)
    TIMEOUT_BEFORE_FIRST_TOKEN = "timeout_before_first_token"
    STALL = "stall"  # no token, or an event left unfinished, for longer than the stall timeout
    UPSTREAM_ABORT_MID_STREAM = "upstream_abort_mid_stream"  # cut, or an error event in the stream
    # The stream could not be read (forwarded untouched unless an event passed the 1 MiB bound,
    # then cut); it takes the blame over what followed (the client leaving, a missing [DONE]).
    PROTOCOL_ERROR = "protocol_error"
    CLIENT_DISCONNECT = "client_disconnect"  # the client went away; the upstream request was cancelled
    # The client read nothing for the stall timeout while the upstream waited on it: cut, its doing.
    CLIENT_SLOW = "client_slow"
    # A bug of ours ended the request (an unexpected exception): the client got a 500, or its
    # stream was cut; the record names the exception's type.
    INTERNAL_ERROR = "internal_error"


STATUS = {
    Outcome.OK: Status.OK,
    Outcome.HTTP_ERROR: Status.HTTP_ERROR,
    Outcome.CONNECT_ERROR: Status.CONNECT_ERROR,
    Outcome.TIMEOUT_BEFORE_FIRST_TOKEN: Status.TIMEOUT,
    Outcome.STALL: Status.TIMEOUT,
    Outcome.UPSTREAM_ABORT_MID_STREAM: Status.STREAM_INTERRUPTED,
    Outcome.PROTOCOL_ERROR: Status.PROTOCOL_ERROR,
    Outcome.CLIENT_DISCONNECT: Status.CANCELLED,
    Outcome.CLIENT_SLOW: Status.CANCELLED,
    Outcome.INTERNAL_ERROR: Status.HTTP_ERROR,  # STREAM_INTERRUPTED when the head was sent already
}


class InternalFault(Exception):
    """A bug of ours in a callback (the relay's, the meter's): carried to the request's handler, so
    the record blames the gateway, not the upstream."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause


def internal_error_text(exc: BaseException) -> str:
    """The record's error for a fault of ours: its type only (no message, no traceback)."""
    cause = exc.cause if isinstance(exc, InternalFault) else exc
    return f"internal error ({type(cause).__name__})"
