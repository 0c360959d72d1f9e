"""Business outcome events an application reports against the gateway's requests (a task completed,
an answer accepted, a complaint), and the checks on what it sends. Pure: the gateway stamps the time
and finds the arm; the store keeps them beside the records; ``core.analysis.arms`` counts them."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

UNKNOWN_ARM = "unknown"  # a request id the gateway did not (or no longer) remember
MAX_EVENTS_PER_POST = 1000
MAX_ID_CHARS = 128  # as the gateway's own x-request-id bound
_EVENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True, slots=True)
class EventInput:
    """One reported event as the application sent it (validated, not yet joined to an arm)."""

    event: str
    request_id: str | None = None
    user_id: str | None = None
    value: float | None = None


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    """An event joined to its arm. ``user`` is the gateway's hash of the sticky key, never the key."""

    event: str
    arm: str
    unix_s: float
    request_id: str | None = None
    user: str | None = None
    upstream: str | None = None
    value: float | None = None
    session: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EventError(ValueError):
    """Bad input: a short reason that never repeats the value sent."""


def parse_events(payload: object) -> list[EventInput]:
    """One event object or a JSON array of them -> validated inputs; raises EventError."""
    items = payload if isinstance(payload, list) else [payload]
    if not items:
        raise EventError("no event given")
    if len(items) > MAX_EVENTS_PER_POST:
        raise EventError(f"at most {MAX_EVENTS_PER_POST} events per request")
    return [_one(item, i) for i, item in enumerate(items)]


def _one(item: object, index: int) -> EventInput:
    where = f"event {index}"
    if not isinstance(item, dict):
        raise EventError(f"{where}: expected a JSON object")
    unknown = set(item) - {"request_id", "user_id", "event", "value"}
    if unknown:
        raise EventError(f"{where}: unknown field (fields: request_id, user_id, event, value)")
    name = item.get("event")
    if not isinstance(name, str) or not _EVENT_NAME.match(name):
        raise EventError(f"{where}: 'event' must be a name of letters, digits, _ . : - (up to 64)")
    request_id = _id(item.get("request_id"), "request_id", where)
    user_id = _id(item.get("user_id"), "user_id", where)
    if request_id is None and user_id is None:
        raise EventError(f"{where}: give 'request_id' or 'user_id'")
    value = item.get("value")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise EventError(f"{where}: 'value' must be a finite number")
        value = float(value)
    return EventInput(name, request_id, user_id, value)


def _id(value: object, field: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise EventError(f"{where}: '{field}' must be a string of 1 to {MAX_ID_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise EventError(f"{where}: '{field}' holds a control character")
    return value


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A change of a running gateway's configuration (a reload or a move of the split): who made
    it, when, and the settings before and after (``split``: per upstream its arm and weight, then
    the SLOs, labels, mirrors). ``epoch`` counts the changes of one session from 0 (its start)."""

    session: str
    epoch: int
    unix_s: float
    who: str  # "SIGHUP", "POST /tokenpace/config from 10.0.0.7 (tokenpace arms --apply)", ...
    changed: tuple[str, ...]  # the settings that differ, by their configuration keys
    before: dict[str, Any]
    after: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": list(self.changed)}

    @staticmethod
    def weights(side: dict[str, Any]) -> dict[str, float]:
        """Per arm, the summed weight of its upstreams in ``before`` or ``after``."""
        out: dict[str, float] = {}
        for up in side.get("split", []):
            out[up["arm"]] = out.get(up["arm"], 0.0) + float(up.get("weight", 0.0))
        return out
