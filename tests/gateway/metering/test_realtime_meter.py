"""A Realtime session's records, from the events alone: binding, timing, refusals, bounds, breakage."""

from __future__ import annotations

import orjson

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.outcome import Outcome
from tokenpace.gateway.metering.realtime_meter import MAX_OPEN_RESPONSES, RealtimeMeter
from tokenpace.wire.dialects import get_dialect


class Session:
    def __init__(self) -> None:
        self.made: list[RequestRecord] = []
        self.ended: list[tuple[RequestRecord, Outcome, str | None]] = []
        self.meter = RealtimeMeter(get_dialect("realtime"), self._new, self._finish, 0)

    def _new(self, now: int) -> RequestRecord:
        rec = RequestRecord(f"r{len(self.made)}", sent_ns=now)
        self.made.append(rec)
        return rec

    def _finish(self, rec: RequestRecord, outcome: Outcome, error: str | None) -> None:
        self.ended.append((rec, outcome, error))

    def client(self, now: int, **event: object) -> None:
        self.meter.from_client(orjson.dumps(event).decode(), now)

    def upstream(self, now: int, **event: object) -> None:
        self.meter.from_upstream(orjson.dumps(event).decode(), now)


def created(rid: str) -> dict:
    return {"type": "response.created", "response": {"id": rid, "status": "in_progress"}}


def done(rid: str, status: str = "completed") -> dict:
    usage = {"input_tokens": 4, "output_tokens": 2}
    return {"type": "response.done", "response": {"id": rid, "status": status, "usage": usage}}


def delta(rid: str, text: str) -> dict:
    return {"type": "response.output_text.delta", "response_id": rid, "delta": text}


def test_each_response_is_timed_from_its_own_create_to_its_done():
    s = Session()
    s.client(10, type="session.update")  # not a response: no record
    s.client(100, type="response.create", response={})
    s.upstream(150, **created("a"))
    s.upstream(160, **delta("a", ""))  # an empty delta carries no token
    s.upstream(170, **delta("a", " hi"))
    s.upstream(180, **delta("a", " there"))
    s.upstream(190, **done("a"))
    ((rec, outcome, error),) = s.ended
    assert (outcome, error) == (Outcome.OK, None)
    assert rec.sent_ns == 100 and rec.headers_ns == 150 and rec.http_status == 101
    assert rec.first_token_ns == rec.first_answer_ns == 170 and rec.token_ns == [170, 180]
    assert rec.prompt_tokens == 4 and rec.output_tokens_server == 2 and rec.finish_reason == "completed"


def test_an_error_answering_a_create_fails_that_one_only():
    s = Session()
    s.client(1, type="response.create", event_id="e1")
    s.client(2, type="response.create", event_id="e2")
    error = {"type": "invalid_request_error", "message": "busy", "event_id": "e2"}
    s.upstream(3, type="error", error=error)
    ((rec, outcome, text),) = s.ended
    assert rec is s.made[1] and outcome is Outcome.HTTP_ERROR and text == "error event: busy"
    s.upstream(4, **created("a"))
    s.upstream(5, **done("a", "failed"))
    assert s.ended[1][0] is s.made[0] and s.ended[1][1] is Outcome.UPSTREAM_ABORT_MID_STREAM


def test_responses_measured_at_once_are_bounded():
    s = Session()
    for i in range(MAX_OPEN_RESPONSES + 5):
        s.client(i, type="response.create")
    assert len(s.made) == MAX_OPEN_RESPONSES  # the rest are relayed, not measured


def test_a_malformed_event_or_a_closed_session_ends_what_is_open():
    s = Session()
    s.client(1, type="response.create")
    s.upstream(2, **created("a"))
    s.meter.from_upstream('{"type":"response.output_text.delta","delta":', 3)
    assert s.ended[0][1] is Outcome.PROTOCOL_ERROR
    s.client(4, type="response.create")
    s.meter.close(Outcome.CLIENT_DISCONNECT, "the client went away")
    assert s.ended[1][1] is Outcome.CLIENT_DISCONNECT and not s.meter.open and not s.meter.waiting
