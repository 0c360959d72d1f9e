"""The live feed's bounds: records wait in a bounded list between folds, a failing store is not
written again (the run goes on), and the final figures go out once, after any fold in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tokenpace.adapters.store import StoreError
from tokenpace.app.watch import live as live_mod
from tokenpace.app.watch.live import LiveFeed
from tokenpace.core.analysis.diagnosis.live_figures import ClientNow
from tokenpace.core.record import RequestRecord, Status


class FakeStore:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, Any]] = []

    def start_live(self, run_id: str, kind: str, labels: dict[str, str]) -> None:
        self.calls.append(("start", (run_id, kind, labels)))

    def publish_live(self, run_id: str, figures: dict, state: str = "running", ended: bool = False) -> None:
        if self.fail:
            raise StoreError("database is locked")
        self.calls.append(("publish", (figures["done"], state, ended)))


def _ok(i: int) -> RequestRecord:
    ms = 1_000_000
    return RequestRecord(
        f"r{i}", sent_ns=i * ms, first_token_ns=i * ms + 20 * ms, token_ns=[i * ms + 20 * ms],
        output_tokens_counted=1, end_ns=i * ms + 30 * ms, status=Status.OK,
    )  # fmt: skip


def test_records_past_the_bound_are_counted_not_folded(monkeypatch) -> None:
    monkeypatch.setattr(live_mod, "MAX_PENDING", 5)
    store = FakeStore()

    async def go() -> None:
        feed = LiveFeed("r", "bench", store, {"a": "b"})  # type: ignore[arg-type]
        feed.start()
        for i in range(8):
            feed.record(_ok(i))
        done = feed.finish("completed")
        assert done is not None
        await asyncio.wrap_future(done)
        assert feed.finish("completed") is None  # once only

    asyncio.run(go())
    assert store.calls[0] == ("start", ("r", "bench", {"a": "b"}))
    assert store.calls[-1] == ("publish", (5, "completed", True))


def test_a_failing_store_is_not_written_again_and_the_display_still_gets_figures() -> None:
    store = FakeStore(fail=True)
    shown: list[int] = []

    async def go() -> LiveFeed:
        feed = LiveFeed("r", "bench", store, {}, show=lambda s: shown.append(s.done))  # type: ignore[arg-type]
        feed.start()
        feed.record(_ok(1))
        feed._submit(ClientNow(), "running", False)
        for _ in range(100):  # the fold runs in the worker thread; its snapshot comes back here
            await asyncio.sleep(0.01)
            if shown:
                break
        feed.record(_ok(2))
        await asyncio.wrap_future(feed.finish("completed"))  # type: ignore[arg-type]
        return feed

    feed = asyncio.run(go())
    assert shown == [1]
    assert feed.problem == "database is locked" and store.calls == [("start", ("r", "bench", {}))]
    assert feed.latest is not None and feed.latest.done == 2  # the final figures, not shown once ended


def test_in_flight_is_sent_minus_ended() -> None:
    feed = LiveFeed("r", "bench", None, {}, sent=lambda: 7)
    feed.record(_ok(1))
    feed.record(_ok(2))
    assert feed._in_flight() == 5
    assert LiveFeed("r", "bench", None, {})._in_flight() is None  # worker processes: not known
    feed._pool.shutdown()


@pytest.mark.parametrize("state", ["completed", "interrupted by the user"])
def test_the_final_figures_carry_the_runs_state(state: str) -> None:
    store = FakeStore()

    async def go() -> None:
        feed = LiveFeed("r", "bench", store, {})  # type: ignore[arg-type]
        feed.start()
        feed.record(_ok(1))
        await asyncio.wrap_future(feed.finish(state))  # type: ignore[arg-type]

    asyncio.run(go())
    assert store.calls[-1] == ("publish", (1, state, True))
