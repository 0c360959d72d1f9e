"""``runs show RUN --slowest N --traces FILE``: the slowest requests' TTFT, hop by hop."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from tokenpace.app.reports.trace_tail import TailRequest
from tokenpace.cli.fit import show_table

COLUMNS = (
    ("ttft ms", "client's TTFT"),
    ("client-gw", "client <-> gateway network"),
    ("gateway", "gateway's own: admission, route, connect"),
    ("to engine", "left the gateway (or client) -> engine arrival"),
    ("queue", "engine queue"),
    ("prefill", "engine prefill"),
    ("from engine", "engine first token -> gateway (or client)"),
    ("decode", "engine decode, after the first token"),
)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def show_tail(console: Console, rows: list[TailRequest], traces: Path) -> None:
    table = Table(header_style="bold", title=f"slowest {len(rows)} by TTFT, where the time went (ms)")
    for col in ("request", "trace", *(c for c, _ in COLUMNS)):
        table.add_column(col, justify="left" if col in ("request", "trace") else "right")
    missing = 0
    for row in rows:
        h = row.hops
        if h is None:
            missing += 1
            cells = [_ms(row.ttft_ms)] + ["-"] * (len(COLUMNS) - 1)
        else:
            inside = h.gateway_ms  # None: the trace has no gateway hop spans; "to engine" holds it
            vals = (
                h.client_gateway_ms,
                inside,
                h.to_engine_ms - (inside or 0.0),
                h.queue_ms,
                h.prefill_ms,
                h.from_engine_ms,
                h.decode_ms,
            )
            cells = [_ms(row.ttft_ms), *(_ms(v) for v in vals)]
        table.add_row(row.record.request_id, (row.record.trace_id or "")[:16], *cells)
    show_table(console, table, optional=("request", "decode"))
    if missing:
        console.print(
            f"{missing} request(s) without a whole trace (client, engine) in {traces}", highlight=False
        )
