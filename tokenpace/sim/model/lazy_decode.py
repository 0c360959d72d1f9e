"""Decoding requests advanced by a shared step counter, touched only when something happens to them.

In a virtual run most of a step's requests are plain decoders: each gains one token and nothing else.
Touching every one of them every step made a virtual run cost O(steps x batch) Python iterations. A
*lazy* decoder instead stores its numbers as of the tick it became lazy (`SimRequest.lz`); the engine
bumps one counter (`tick`) for every step in which all running requests decoded, so a lazy request's
true numbers are its stored ones plus the ticks since. Each lazy request has one event tick: the
first step at which it needs a new KV block or finishes. At that tick it is materialized (its fields
made true) and handled one by one, exactly as the step-by-step engine would, in running order.

Any step that is not "every running request decodes" (a chunked prefill still going, a preemption,
a budget that cannot hold the batch) first materializes everyone and takes the engine's ordinary path,
so the results are identical to the unlazy engine's (`tests/sim/virtual_time/test_sim_virtual_pinned.py`).
Bounded by the running batch: one heap entry and one `finishing` count per lazy request.
"""

from __future__ import annotations

import heapq

from tokenpace.sim.model.request import RUNNING, SimRequest


class LazyDecoders:
    __slots__ = (
        "block_size",
        "count",
        "events",
        "finish_ticks",
        "finishing",
        "tick",
        "tick_end",
        "total_base",
    )

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.tick = 0  # steps in which every running request decoded
        self.tick_end = 0.0  # end time of the last such step: every lazy request's last token
        self.count = 0  # lazy requests
        self.total_base = (
            0  # sum over lazy requests of (prompt + generated - lz): context = this + count*tick
        )
        self.events: list[tuple[int, int, SimRequest]] = []  # (event tick, admission seq, request)
        self.finishing: dict[int, int] = {}  # finish tick -> lazy requests finishing in that step
        # finishing's ticks as a heap (stale ones popped when seen): at most one per add between pops
        self.finish_ticks: list[int] = []

    def context(self) -> int:
        """Total context (prompt + generated tokens) of the lazy requests now."""
        return self.total_base + self.count * self.tick

    def add(self, r: SimRequest) -> None:
        """Make a materialized decoder (num_computed == tokens - 1, generated > 0) lazy."""
        t = self.tick
        r.lz = t
        fin = t + r.target_len - r.generated - 1  # the step (tick) whose completion finishes it
        block = t + len(r.blocks) * self.block_size - r.num_computed  # the step that needs a new block
        r.lz_fin = fin
        self.count += 1
        self.total_base += r.prompt_len + r.generated - t
        waiting_to_finish = self.finishing.get(fin, 0)
        if not waiting_to_finish:
            heapq.heappush(self.finish_ticks, fin)
        self.finishing[fin] = waiting_to_finish + 1
        heapq.heappush(self.events, (min(fin, block), r.seq, r))

    def min_finish(self) -> int:
        """The earliest finish tick of a lazy request (there must be one)."""
        ticks, finishing = self.finish_ticks, self.finishing
        while ticks[0] not in finishing:
            heapq.heappop(ticks)
        return ticks[0]

    def materialize(self, r: SimRequest) -> None:
        """Make r's fields true and take it out of the lazy set (its heap entry is the caller's)."""
        self.total_base -= r.prompt_len + r.generated - r.lz
        d = self.tick - r.lz
        if d:
            r.generated += d
            r.num_computed += d
            r.last_token_t = self.tick_end
        left = self.finishing[r.lz_fin] - 1
        if left:
            self.finishing[r.lz_fin] = left
        else:
            del self.finishing[r.lz_fin]
        self.count -= 1
        r.lz = -1

    def pop_due(self) -> list[SimRequest]:
        """The requests whose event is this tick, in running (admission) order, still lazy.

        Every event is handled at its own tick (a lazy step pops this tick's, a fast-forward pops all
        it skips, any other step clears them), so all popped share this tick and the heap's
        (tick, seq) order is admission order.
        """
        due: list[SimRequest] = []
        events, tick = self.events, self.tick
        while events and events[0][0] <= tick:
            due.append(heapq.heappop(events)[2])
        return due

    def took_block(self, r: SimRequest) -> None:
        """A lazy request whose event was a new KV block got it: its next event is a block later."""
        heapq.heappush(self.events, (min(r.lz_fin, self.tick + self.block_size), r.seq, r))

    def materialize_all(self, running: list[SimRequest]) -> None:
        if not self.count:
            return
        for r in running:
            if r.lz >= 0:
                self.materialize(r)
        self.events.clear()
        self.finish_ticks.clear()

    def add_decoders(self, reqs: list[SimRequest]) -> None:
        """Make lazy every request in reqs that is running, not lazy, and decoding."""
        for r in reqs:
            if (
                r.lz < 0
                and r.state == RUNNING
                and r.generated > 0
                and not r.aborted
                and r.num_computed == r.prompt_len + r.generated - 1
            ):
                self.add(r)
