"""The loop's shared metering queue: rounds of bounded work, round-robin between streams, other
callbacks run between rounds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tokenpace.gateway.metering import turns as turns_module
from tokenpace.gateway.metering.turns import Turns, turns_of


def _run(round_s: float, slices: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Streams with ``slices[name]`` slices each, asked at once; a marker callback is scheduled
    after every round's start, so the log shows where other work got the loop."""
    monkeypatch.setattr(turns_module, "ROUND_S", round_s)
    log: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        turns = Turns()
        left = dict(slices)

        def job_of(name: str) -> Callable[[], bool]:
            def job() -> bool:
                log.append(name)
                loop.call_soon(log.append, "|")  # runs after this round, before the next one
                left[name] -= 1
                return left[name] > 0

            return job

        for name in slices:
            turns.ask(job_of(name))
        while any(left.values()):
            await asyncio.sleep(0)

    asyncio.run(main())
    return log


def test_a_round_past_its_budget_leaves_the_rest_to_the_next_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(0.0, {"a": 2, "b": 2, "c": 1}, monkeypatch)
    # no budget: one slice a round, the streams in turn, other callbacks between every two slices
    assert "".join(log).replace("||", "|") == "a|b|c|a|b|"


def test_a_round_runs_each_waiting_stream_at_most_once(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(10.0, {"a": 3, "b": 1}, monkeypatch)
    rounds = "".join(log).replace("|", " ").split()
    assert rounds == ["ab", "a", "a"]


def test_one_queue_per_loop() -> None:
    async def main() -> tuple[Turns, Turns]:
        return turns_of(asyncio.get_running_loop()), turns_of(asyncio.get_running_loop())

    first, again = asyncio.run(main())
    other, _ = asyncio.run(main())
    assert first is again and other is not first
