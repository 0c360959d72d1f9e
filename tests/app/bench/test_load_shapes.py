"""Load shapes are strategies: chosen from the config and the workload, and driven through the
run's public surface only (here a fake context with no network at all)."""

from __future__ import annotations

import asyncio
from itertools import count
from time import perf_counter_ns

from tokenpace.app.bench.load_shapes import ClosedLoop, OpenLoop, choose
from tokenpace.app.bench.sessions import Sessions
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.workload import SyntheticWorkload, TraceRow, TraceWorkload
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.sessions import SessionWorkload

LEN = parse_length("8")


def requests(n: int):
    return iter([(RequestRecord(request_id=f"r{i}", index=i), b"x") for i in range(n)])


class FakeContext:
    """The surface a load shape may use; sends end at once, and it counts how many overlap."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.sent: list[RequestRecord] = []
        self.tracked = 0
        self.in_flight = self.peak = 0
        self.stop_after = stop_after
        self.stopping = False
        self.warm = True

    async def send(self, record, payload, capture=None):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0)
        record.status = Status.OK
        self.sent.append(record)
        self.in_flight -= 1
        if self.stop_after is not None and len(self.sent) >= self.stop_after:
            self.stopping = True

    def not_sent(self, record, reason):
        raise AssertionError(reason)

    def client_failed(self, exc):
        raise exc

    def track(self, task):
        self.tracked += 1

    async def drain(self):
        await asyncio.sleep(0.01)

    async def warmed_up(self):
        return None


def test_closed_loop_sends_every_request_with_its_users_and_no_more():
    ctx = FakeContext()
    asyncio.run(ClosedLoop(requests(9), users=3).drive(ctx, 0, None))  # type: ignore[arg-type]
    assert sorted(r.index for r in ctx.sent) == list(range(9))
    assert ctx.tracked == 3 and ctx.peak <= 3
    assert {r.worker for r in ctx.sent} <= {0, 1, 2}


def test_open_loop_stops_sending_when_the_run_is_stopping():
    ctx = FakeContext(stop_after=4)
    offsets = (i * 0.02 for i in count())  # one every 20 ms, on the shape's own clock
    t0 = perf_counter_ns()
    asyncio.run(OpenLoop(requests(20), offsets, None).drive(ctx, t0, None))  # type: ignore[arg-type]
    assert 4 <= len(ctx.sent) < 20
    due = [int(i * 0.02 * 1e9) for i in range(len(ctx.sent))]
    assert [r.scheduled_ns - t0 for r in ctx.sent] == due


def test_the_config_and_the_workload_choose_the_shape():
    closed = BenchConfig(url="u", concurrency=2, requests=4)
    opened = BenchConfig(url="u", rate=5.0, requests=4)
    synthetic = SyntheticWorkload(LEN, LEN, 0)
    trace = TraceWorkload([TraceRow(0.0, 8, 8), TraceRow(2.0, 8, 8)], speedup=2.0)
    assert isinstance(choose(closed, synthetic, requests(1), None, "p"), ClosedLoop)  # type: ignore[arg-type]
    shape = choose(opened, synthetic, requests(1), None, "p")  # type: ignore[arg-type]
    assert isinstance(shape, OpenLoop)
    replay = choose(opened, trace, requests(1), None, "p")  # type: ignore[arg-type]
    assert isinstance(replay, OpenLoop) and list(replay.offsets) == [0.0, 1.0]  # the trace's clock
    sessions = SessionWorkload(synthetic, turns=2)
    assert isinstance(choose(closed, sessions, requests(0), None, "p"), Sessions)  # type: ignore[arg-type]
