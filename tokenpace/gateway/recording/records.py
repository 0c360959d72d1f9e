"""A generation request's record as the gateway opens it: its id (always the gateway's own: events
join on it), the client's own id kept apart for its logs, and the labels every series and stored
run is split by (model, upstream, arm, api, the upstream's version and region, the user's hash, the
gateway's own ``--label``s). A request whose handling failed before an upstream was chosen gets
one too (``unrouted``), its upstream and arm ``NO_UPSTREAM``."""

from __future__ import annotations

import contextlib
import uuid

from aiohttp import web

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import Upstream
from tokenpace.gateway.experiments.events import RecentRequests, user_hash
from tokenpace.gateway.messages.header_bytes import printable
from tokenpace.gateway.messages.heads import CLIENT_REQUEST_ID, REQUEST_ID
from tokenpace.gateway.observability.prom import ModelLabels
from tokenpace.wire.dialects import dialect_at
from tokenpace.wire.dialects.base import Dialect

# The upstream and arm labels of a request that failed (a fault of ours) before one was chosen:
# one more value of those labels, whatever the traffic (its series and records are bounded as any).
NO_UPSTREAM = ""


class RecordMaker:
    def __init__(
        self, worker: int, models: ModelLabels, recent: RecentRequests, static: dict[str, str] | None = None
    ) -> None:
        self.worker = worker  # which of --workers, written into each record
        self.models = models
        self.recent = recent
        self.static = static or {}  # the gateway's --label (no key of the ones below: config checks)
        self.epoch = "0"  # the config's epoch (live changes since the start): runs are kept per epoch

    def unrouted(self, request: web.Request, start: int) -> RequestRecord | None:
        """The record of a generation request that a fault of ours ended before its upstream was
        chosen (reading its body, routing): ``NO_UPSTREAM``, model ``unknown`` (its body may be
        unread). None for a path no dialect records, or when even this fails (the fault is still
        answered and counted)."""
        dialect = dialect_at(request.path, request.method)
        if dialect is None or dialect.method != "POST":  # the Realtime WebSocket: per response
            return None
        nowhere = Upstream(name=NO_UPSTREAM, url="", arm=NO_UPSTREAM)
        with contextlib.suppress(Exception):
            record = self(request, nowhere, dialect, None, None, start)
            record.labels.update(upstream=NO_UPSTREAM, arm=NO_UPSTREAM)  # not the upstream's labels
            return record
        return None

    def __call__(
        self,
        request: web.Request,
        upstream: Upstream,
        dialect: Dialect,
        model: str | None,
        key: bytes | None,
        start: int,
        nth: int = 0,
    ) -> RequestRecord:
        user = user_hash(key) if key else None
        # the client's own id (bounded) kept apart for its logs; "-n" for a Realtime session's nth
        client_id = printable(request.headers.get(REQUEST_ID, ""))[:128]
        client_id += f"-{nth}" if client_id and nth else ""
        record = RequestRecord(
            request_id=uuid.uuid4().hex,
            worker=self.worker,
            labels={
                **self.static,
                "model": self.models(model),  # what was asked for, never the upstream's model=
                "upstream": upstream.name,
                "arm": upstream.arm,
                "api": dialect.api,
                "config_epoch": self.epoch,
                **upstream.labels,
                **({"user": user} if user else {}),
                **({CLIENT_REQUEST_ID: client_id} if client_id else {}),
            },
            scheduled_ns=start,
            dispatched_ns=start,
            sent_ns=start,
        )
        self.recent.add(record.request_id, upstream.arm, upstream.name, user, client_id)
        return record
