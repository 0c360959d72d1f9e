"""A stored record decodes to the record that was stored, each field as it was."""

from __future__ import annotations

import dataclasses

from tokenpace.core.record import RequestRecord, Status


def _filled() -> RequestRecord:
    """Every field away from its default (a None default given a value)."""
    rec = RequestRecord(request_id="r1")
    for f in dataclasses.fields(rec):
        if f.default is None:
            setattr(rec, f.name, "x" if "str" in str(f.type) else 7)
    rec.status, rec.labels, rec.token_ns, rec.trace_sampled = Status.TIMEOUT, {"arm": "b"}, [1, 2], False
    return rec


def test_a_record_round_trips_whether_its_optional_fields_are_set_or_not() -> None:
    for rec in (RequestRecord(request_id="r0"), _filled()):
        back = RequestRecord.from_dict(rec.to_dict())
        assert back == rec
        assert [getattr(back, f.name) for f in dataclasses.fields(rec)] == [
            getattr(rec, f.name) for f in dataclasses.fields(rec)
        ]
