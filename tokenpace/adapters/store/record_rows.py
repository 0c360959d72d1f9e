"""A run's request records as rows of the store's records table."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from tokenpace.adapters.store import schema as s
from tokenpace.core.record import RequestRecord

INSERT_BATCH = 1000  # rows per INSERT statement: one statement per batch keeps memory bounded


def insert_records(
    conn: sa.Connection, run_id: str, records: Sequence[RequestRecord], first_seq: int
) -> None:
    """``records`` as rows of ``run_id`` from sequence number ``first_seq``, in batches."""
    for start in range(0, len(records), INSERT_BATCH):
        batch = records[start : start + INSERT_BATCH]
        conn.execute(
            sa.insert(s.records),
            [
                {
                    "run_id": run_id,
                    "seq": first_seq + start + i,
                    "request_id": r.request_id,
                    "status": r.status.value,
                    "warmup": r.warmup,
                    "data": r.to_dict(),
                }
                for i, r in enumerate(batch)
            ],
        )
