"""Client stalls judged by the requests they held: stalls injected into the health sampler of a
real run (where each stall was is the sampler's input), placed on the records they held."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.adapters.report.figures import Step
from tokenpace.adapters.report.html import render_html
from tokenpace.app.bench import bench as bench_module
from tokenpace.app.bench.bench import BenchRun
from tokenpace.app.run.bench_config import BenchResult
from tokenpace.app.watch.health import HealthMonitor, HealthReport
from tokenpace.core.record import RequestRecord
from tokenpace.testing.scripted_server import Script, ScriptedServer

Placer = Callable[[list[RequestRecord]], list[tuple[int, int]]]


def _run(monkeypatch: pytest.MonkeyPatch, place: Placer, **kw: Any) -> BenchResult:
    """A 40-request run (one at a time: no two requests' stalls overlap) whose sampler also saw the
    stalls ``place`` puts on its records."""
    holder: dict[str, BenchRun] = {}

    class Injected(HealthMonitor):
        def report(self, chunks: int, dispatch_lags_ms: list[float], open_loop: bool) -> HealthReport:
            # only the injected stalls: what a busy test machine adds would make the counts vary
            self.stalls_ms.clear()
            del self.stall_starts[:], self.stall_ends[:]
            for start, end in sorted(place(holder["run"].records)):
                self.stalls_ms.append((end - start) / 1e6)
                self._place(start, end)
            return super().report(chunks, dispatch_lags_ms, open_loop)

    monkeypatch.setattr(bench_module, "HealthMonitor", Injected)

    async def go() -> BenchResult:
        async with ScriptedServer(Script(ttft_s=0.005, itl_s=0.002, tokens=8)) as srv:
            run = BenchRun(bench_config(srv.url, concurrency=1, requests=40, **kw))
            holder["run"] = run
            return await run.run()

    return asyncio.run(go())


HELD_NS = 4_000_000  # over the 3 ms a stall must hold a request by to count toward the share


def _on_ends(records: list[RequestRecord]) -> list[tuple[int, int]]:
    """A 4 ms stall ending at each request's end (E2E held by 4 ms, never before the send)."""
    out = []
    for r in records:
        assert r.end_ns is not None
        out.append((max(r.sent_ns, r.end_ns - HELD_NS), r.end_ns))
    return out


def _fastest(n: int) -> Placer:
    def place(records: list[RequestRecord]) -> list[tuple[int, int]]:
        return _on_ends(sorted(records, key=lambda r: (r.end_ns or 0) - r.sent_ns)[:n])

    return place


def test_stalls_on_a_few_requests_that_move_nothing_leave_the_run_valid(monkeypatch) -> None:
    # the two fastest requests' ends: taking 4 ms off them moves no percentile above them
    result = _run(monkeypatch, _fastest(2))
    assert not any("stall" in r for r in result.invalid_reasons), result.invalid_reasons
    held = [r for r in result.records if r.client_stall_ms is not None]
    assert len(held) == 2 and all(3 < (r.client_stall_ms or 0) <= 4 for r in held)
    impact = result.to_dict()["summary"]["client"]["stalls"]["impact"]
    assert impact["held"] == 2 and impact["requests"] == 40 and impact["valid"] is True
    assert impact["share"] == 0.05 and "2 of 40 requests" in impact["why"]
    doc = result.to_dict()
    page = render_html(doc, [Step("run", doc, result.records)])  # the HTML report says it too
    assert "Client stalls: 2 of 40 requests (5.0%) had a timestamp a client stall held over 3 ms" in page


def test_stalls_on_many_requests_make_the_run_not_valid_and_say_why(monkeypatch) -> None:
    result = _run(monkeypatch, lambda records: _on_ends(records[::2]))  # every other request
    assert not result.valid
    assert any("stalled during 20 of 40 requests" in r for r in result.invalid_reasons), (
        result.invalid_reasons
    )
    doc = result.to_dict()
    assert doc["valid"] is False and doc["summary"]["client"]["stalls"]["impact"]["share"] == 0.5
    assert sum(r.client_stall_ms is not None for r in result.records) == 20


def test_the_tolerance_sets_the_share_of_held_requests_allowed(monkeypatch) -> None:
    result = _run(monkeypatch, lambda records: _on_ends(records[::2]), stall_tolerance=0.6)
    assert not any("tolerated" in r for r in result.invalid_reasons)
    assert result.to_dict()["summary"]["client"]["stalls"]["impact"]["tolerance"] == 0.6


def _dispatch_reasons(lags_ms: list[float]) -> list[str]:
    monitor = HealthMonitor()  # never started: no probes, no CPU, only the dispatch rule speaks
    return [r for r in monitor.report(0, lags_ms, open_loop=True).invalid_reasons if "late" in r]


def test_one_late_request_in_a_short_open_loop_step_is_not_the_load_sent_lower() -> None:
    # 48 requests: the sample P99 is the latest one (8 ms), but one late of 48 does not show that
    # more than 1 % of the load went out late
    assert _dispatch_reasons([0.2] * 47 + [8.0]) == []
    # nor in a step of 8 (the docs' open-loop sweeps); two of 8 are
    assert _dispatch_reasons([0.2] * 7 + [8.0]) == []
    assert _dispatch_reasons([0.2] * 6 + [8.0] * 2)


def test_requests_late_beyond_one_percent_at_95_percent_make_the_run_not_valid() -> None:
    [reason] = _dispatch_reasons([0.2] * 44 + [8.0] * 4)
    assert "4 of 48 late" in reason and "lower than asked" in reason
    # at 10,000 requests, 2 % late is beyond 1 % whatever the sampling
    assert _dispatch_reasons([0.2] * 9_800 + [6.0] * 200)
