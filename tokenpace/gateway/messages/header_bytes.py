"""Header values as the bytes the client sent.

aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: valid UTF-8 becomes text, any other
byte (obs-text, RFC 9110 5.5) a lone surrogate. Encoding such a string the usual way raises, which
once answered ``X-Note: €`` with a 500 and no record. These turn it back into the very bytes (to
forward them unchanged, as Envoy does, or to hash or compare them), or into text safe to store.
"""

from __future__ import annotations


def raw(value: str) -> bytes:
    """The bytes a header value arrived as (any string: one from elsewhere never raises)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte decodes to: not from a header
        return value.encode("utf-8", "replace")


def printable(value: str) -> str:
    """Valid UTF-8 kept, any other byte as U+FFFD: safe in JSON records and log lines."""
    return raw(value).decode("utf-8", "replace")
