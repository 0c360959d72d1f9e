"""What the client's own stalls could have done to a run's figures. Pure.

A stall is a stretch in which the client's event loop did not run (``app/watch/health.py`` sees it
as a sampler that woke late). Anything that arrived during it was timestamped when the loop ran
again, so a timestamp taken inside a stall, or just after it ended (``HOLD_SLACK_NS``), may be late
by up to the time since the stall began (never before the request was sent; a request sent after
the stall ended is not held by it). A stall in the
middle of a long stream that no timestamp fell into moved nothing: the server kept working.

Each request gets the most its stalls could have added to its measured times (``added_ns``). The
run's headline percentiles (TTFT, TPOT, E2E at P50/P95/P99) are then recomputed as if every held
timestamp had been taken when its stall began, the largest correction the stalls allow. The run
stands unless one of them (resting on enough samples to be reported) lands outside the run's own
95 % interval of it (and moves by more than ``MIN_MOVE``), or the stalls held more than
``tolerance`` of the requests by more than ``MIN_HELD_NS`` each.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.stats import enough_samples, percentile_cis

# A timestamp this soon after a stall ended may still be one the loop took from its backlog.
HOLD_SLACK_NS = 3_000_000
# A request its stalls could have delayed by no more than this is not counted as held: it is the
# lateness the monitor itself does not call a stall (app/watch/health.py's STALL_THRESHOLD_MS), and a
# stall's start is only known to that precision (when the sampler was due). Such holds still count
# in the figures' correction, and the record is still flagged.
MIN_HELD_NS = 3_000_000
# Share of the measured requests stalls may hold. A closed loop whose users move in waves has one
# request a wave held on a busy host (1 in 16 at 16 users), with no figure moved (BENCHMARKS.md).
DEFAULT_TOLERANCE = 0.10
# A figure the stalls move by less than this share of itself has not moved: far under the smallest
# change a gate acts on (5 %) and the 2 % a rerun of an unchanged server shows, while a simulated
# engine's intervals can be narrower than a timestamp's rounding.
MIN_MOVE = 0.01
JUDGED_PERCENTILES = (50, 95, 99)


@dataclass(frozen=True, slots=True)
class Stalls:
    """One process's stalls, in order and not overlapping: where each began and ended (ns)."""

    starts: Sequence[int]
    ends: Sequence[int]


@dataclass(frozen=True, slots=True)
class Hold:
    """How much later than the truth a request's timestamps may have been taken (ns)."""

    write_ns: int = 0  # its bytes handed to the kernel (the server started late)
    first_ns: int = 0  # the first token
    last_ns: int = 0  # the last token
    end_ns: int = 0  # the end of the response
    write_stall: int = -1  # which stall held each (-1: none); one stall counts once
    first_stall: int = -1
    end_stall: int = -1

    @property
    def added_ns(self) -> int:
        """The most the stalls could have added to any of the request's measured times."""
        return max(self.ttft_ns, self.e2e_ns)

    @property
    def ttft_ns(self) -> int:
        return self.first_ns + (self.write_ns if self.write_stall != self.first_stall else 0)

    @property
    def e2e_ns(self) -> int:
        return self.end_ns + (self.write_ns if self.write_stall != self.end_stall else 0)


def _held(starts: Sequence[int], ends: Sequence[int], t: int | None, since: int) -> tuple[int, int]:
    """(the stall holding timestamp ``t``, how late it may be); (-1, 0) when none held it."""
    if t is None:
        return -1, 0
    i = bisect_left(starts, t) - 1  # the last stall that began before t
    if i < 0 or t > ends[i] + HOLD_SLACK_NS or since >= ends[i]:  # sent after it: nothing held
        return -1, 0
    return i, max(0, t - max(starts[i], since))


def _hold(starts: Sequence[int], ends: Sequence[int], r: RequestRecord) -> Hold:
    since = r.sent_ns
    ws, w = _held(starts, ends, r.request_ns, since)
    fs, f = _held(starts, ends, r.first_token_ns, since)
    _, last = _held(starts, ends, r.token_ns[-1] if r.token_ns else None, since)
    es, e = _held(starts, ends, r.end_ns, since)
    return Hold(w, f, last, e, ws, fs, es)


def request_holds(stalls: Mapping[int, Stalls], records: Sequence[RequestRecord]) -> list[Hold]:
    """Each record's hold, by the stalls of the process (``record.worker``) that measured it."""
    out = []
    for r in records:
        found = stalls.get(r.worker)
        out.append(_hold(found.starts, found.ends, r) if found is not None and r.sent_ns else Hold())
    return out


@dataclass
class StallImpact:
    """What the client's stalls did to a run, and whether it still stands."""

    requests: int  # measured requests (warm-up and never-sent ones not counted)
    held: int  # of them, with a timestamp a stall may have delayed by more than MIN_HELD_NS
    longest_stall_ms: float
    most_added_ms: float  # the most a stall could have added to one request's times
    tolerance: float
    moved: list[str] = field(default_factory=list)  # figures the stalls could move out of their interval
    stalls_dropped: int = 0  # stalls past the monitor's bound: not placed, so not judged

    @property
    def share(self) -> float:
        return self.held / self.requests if self.requests else 0.0

    @property
    def reasons(self) -> list[str]:
        """Why the stalls make the run NOT VALID (empty: they do not)."""
        out = []
        if self.stalls_dropped:
            out.append(
                f"the client stalled more often than it could keep track of ({self.stalls_dropped} "
                "stalls not placed): its timestamps cannot be trusted"
            )
        if self.share > self.tolerance:
            out.append(
                f"the client stalled during {self.held} of {self.requests} requests, each by over "
                f"{MIN_HELD_NS / 1e6:.0f} ms ({self.share:.1%} > the {self.tolerance:.0%} tolerated, "
                "--stall-tolerance; longest stall "
                f"{self.longest_stall_ms:.0f} ms)"
            )
        if self.moved:
            out.append(
                "the client's stalls could move "
                + "; ".join(self.moved)
                + ": out of its 95 % interval, so the figure is not the server's"
            )
        return out

    def verdict(self) -> str:
        """One line: why the stalls do or do not matter."""
        reasons = self.reasons
        if reasons:
            return reasons[0]
        if not self.held:
            return f"no request's timestamps were held over {MIN_HELD_NS / 1e6:.0f} ms by a client stall"
        return (
            f"{self.held} of {self.requests} requests ({self.share:.1%}) had a timestamp a client stall "
            f"held over {MIN_HELD_NS / 1e6:.0f} ms (at most {self.most_added_ms:.0f} ms added); taking "
            "that off moves no headline percentile out of its 95 % interval"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "held": self.held,
            "share": self.share,
            "longest_stall_ms": self.longest_stall_ms,
            "most_added_ms": self.most_added_ms,
            "tolerance": self.tolerance,
            "moved": list(self.moved),
            "stalls_dropped": self.stalls_dropped,
            "valid": not self.reasons,
            "why": self.verdict(),
        }


Pairs = dict[str, tuple[list[float], list[float]]]


def _metric_pairs(records: Sequence[RequestRecord], holds: Sequence[Hold]) -> Pairs:
    """Each headline metric (ms) as measured and as it would be with every held timestamp taken at
    its stall's start."""
    out: Pairs = {"TTFT": ([], []), "TPOT": ([], []), "E2E": ([], [])}
    for r, h in zip(records, holds, strict=True):
        if r.warmup or not r.sent_ns or r.status is not Status.OK:
            continue
        if r.first_token_ns is not None:
            ttft = r.first_token_ns - r.sent_ns
            out["TTFT"][0].append(ttft / 1e6)
            out["TTFT"][1].append(max(0, ttft - h.ttft_ns) / 1e6)
        if r.end_ns is not None:
            e2e = r.end_ns - r.sent_ns
            out["E2E"][0].append(e2e / 1e6)
            out["E2E"][1].append(max(0, e2e - h.e2e_ns) / 1e6)
        n = r.output_tokens
        if n > 1 and r.first_token_ns is not None and len(r.token_ns) > 1:
            span = r.token_ns[-1] - r.first_token_ns
            if span > 0:
                out["TPOT"][0].append(span / (n - 1) / 1e6)
                out["TPOT"][1].append(max(0, span - h.last_ns + h.first_ns) / (n - 1) / 1e6)
    return out


def _moved(name: str, measured: list[float], corrected: list[float]) -> list[str]:
    if not measured:
        return []
    arr = np.sort(np.asarray(measured, dtype=float))
    cis = percentile_cis(arr, JUDGED_PERCENTILES)
    points = np.percentile(arr, JUDGED_PERCENTILES)
    fixed = np.percentile(np.asarray(corrected, dtype=float), JUDGED_PERCENTILES)
    out = []
    for p, (lo, hi), was, now in zip(JUDGED_PERCENTILES, cis, points, fixed, strict=True):
        if not enough_samples(len(arr), p):  # reported as resting on too few samples: no figure to move
            continue
        if (now < lo or now > hi) and abs(now - was) > MIN_MOVE * abs(was):
            out.append(f"{name} P{p} from {was:.1f} to {now:.1f} ms (interval [{lo:.1f}, {hi:.1f}])")
    return out


def stall_impact(
    stalls: Mapping[int, Stalls],
    records: Sequence[RequestRecord],
    tolerance: float = DEFAULT_TOLERANCE,
    stalls_dropped: int = 0,
) -> tuple[StallImpact, list[Hold]]:
    """Judge a run's stalls (by worker) against its records; each record's hold, in order."""
    holds = request_holds(stalls, records)
    measured = [(r, h) for r, h in zip(records, holds, strict=True) if not r.warmup and r.sent_ns]
    held = [h for _, h in measured if h.added_ns > MIN_HELD_NS]
    lengths = (e - s for st in stalls.values() for s, e in zip(st.starts, st.ends, strict=True))
    longest = max(lengths, default=0)
    impact = StallImpact(
        requests=len(measured),
        held=len(held),
        longest_stall_ms=longest / 1e6,
        most_added_ms=max((h.added_ns for _, h in measured), default=0) / 1e6,
        tolerance=tolerance,
        stalls_dropped=stalls_dropped,
    )
    if any(h.added_ns for _, h in measured):
        for name, (was, now) in _metric_pairs(records, holds).items():
            impact.moved += _moved(name, was, now)
    return impact, holds
