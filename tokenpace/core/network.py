"""Where a request's time went on the way: connection phases, cold vs warm connections. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import describe


def _ms(values: list[int]) -> dict[str, Any]:
    return describe([v / 1e6 for v in values], with_ci=False).to_dict()


def network_phases(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Phases of measured (non-warm-up) requests; TTFT of those on new connections apart.

    A cold request opened its connection (DNS + TCP + TLS count in its TTFT); a warm one reused a
    kept-alive connection. ``upload`` is from the connection being ready to the request handed to
    the kernel; ``wait_headers`` from then to the response headers (the server's first answer).
    """
    measured = [r for r in records if not r.warmup and r.sent_ns]
    cold = [r for r in measured if r.connect_ns is not None]
    warm = [r for r in measured if r.connect_ns is None]

    def ttfts(rs: list[RequestRecord]) -> list[int]:
        return [
            r.first_token_ns - r.sent_ns for r in rs if r.status is Status.OK and r.first_token_ns is not None
        ]

    upload = [r.request_ns - r.sent_ns - (r.connect_ns or 0) for r in measured if r.request_ns]
    wait = [r.headers_ns - r.request_ns for r in measured if r.request_ns and r.headers_ns]
    return {
        "new_connections": len(cold),
        "reused_connections": len(warm),
        "dns_ms": _ms([r.dns_ns for r in cold if r.dns_ns is not None]),
        "tcp_ms": _ms([r.tcp_ns for r in cold if r.tcp_ns is not None]),
        "tls_ms": _ms([r.tls_ns for r in cold if r.tls_ns is not None]),
        "connect_ms": _ms([r.connect_ns for r in cold if r.connect_ns is not None]),
        "upload_ms": _ms(upload),
        "wait_headers_ms": _ms(wait),
        "ttft_cold_ms": _ms(ttfts(cold)),
        "ttft_warm_ms": _ms(ttfts(warm)),
    }
