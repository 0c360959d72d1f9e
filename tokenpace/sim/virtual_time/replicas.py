"""What-if: several engine replicas behind a router that picks one at random for each request.

Random routing splits a Poisson stream into independent Poisson streams of rate / replicas, so each
replica is run alone on its share (with its own seed) and the results are merged: exact for Poisson
arrivals, an approximation for constant or gamma ones. A closed loop's users (and its request
count) are spread as evenly as they go.
"""

from __future__ import annotations

from dataclasses import replace

from tokenpace.sim.profiles.profile import Network, Profile
from tokenpace.sim.virtual_time.virtual import VirtualResult, run_virtual, run_virtual_streamed
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.sim.virtual_time.virtual_stream import StreamedStep


def _share(total: int, replicas: int, i: int) -> int:
    return total // replicas + (1 if i < total % replicas else 0)


def _parts(load: VirtualLoad, replicas: int) -> list[VirtualLoad]:
    """Each replica's share of the load, with its own seed (none for a replica left without users)."""
    parts = []
    for i in range(replicas):
        if load.rates:
            parts.append(replace(load, rates=tuple(r / replicas for r in load.rates), seed=load.seed + i))
            continue
        users = _share(load.concurrency, replicas, i)
        requests = _share(load.requests, replicas, i) if load.requests else 0
        if users == 0 or (load.requests and requests == 0):
            continue
        parts.append(replace(load, concurrency=users, requests=requests, seed=load.seed + i))
    return parts


def run_replicated(
    load: VirtualLoad, profile: Profile, network: Network, replicas: int
) -> list[VirtualResult]:
    if replicas <= 1:
        return run_virtual(load, profile, network)
    load.validate()
    merged: list[VirtualResult] = []
    for part in _parts(load, replicas):
        merged += run_virtual(part, profile, network)
    merged.sort(key=lambda r: r.record.sent_ns)
    for k, r in enumerate(merged):  # one run's numbering, in send order
        r.record.index = k
        r.record.request_id = str(k)
    return merged


def run_replicated_streamed(
    load: VirtualLoad, profile: Profile, network: Network, replicas: int
) -> list[StreamedStep]:
    """The same, keeping no records: each step's streaming summaries merged over the replicas."""
    load.validate()
    merged: list[StreamedStep] | None = None
    for part in _parts(load, max(1, replicas)):
        steps = run_virtual_streamed(part, profile, network)
        if merged is None:
            merged = steps
            continue
        for into, step in zip(merged, steps, strict=True):
            into.merge(step)
    assert merged is not None  # a validated load gives at least one replica a share
    return merged
