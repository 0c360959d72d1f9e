"""W3C Trace Context (``traceparent``): one trace per request across the client, the gateway and
the engine. ``00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>``."""

from __future__ import annotations

import secrets

HEADER = "traceparent"
_HEX = frozenset("0123456789abcdef")


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


def format_traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace id, parent span id) of a valid header, else None (a bad one starts a new trace, as
    the specification says)."""
    if not value or len(value) < 55:
        return None
    parts = value.strip().lower().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    _, trace_id, span_id, flags = parts[:4]
    if len(trace_id) != 32 or len(span_id) != 16 or len(flags) != 2:
        return None
    if not set(trace_id + span_id + flags) <= _HEX or trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return trace_id, span_id


def is_sampled(value: str | None) -> bool:
    """Whether the hop before asked for this request to be recorded (W3C ``sampled``, bit 0 of the
    flags): False only for a valid header with the bit clear; none, or a bad one, starts a new trace,
    which is recorded."""
    if parse_traceparent(value) is None:
        return True
    flags = (value or "").strip().split("-")[3]
    return bool(int(flags, 16) & 1)
