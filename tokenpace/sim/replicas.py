"""What-if: several engine replicas behind a router that picks one at random for each request.

Random routing splits a Poisson stream into independent Poisson streams of rate / replicas, so each
replica is run alone on its share (with its own seed) and the results are merged: exact for Poisson
arrivals, an approximation for constant or gamma ones. A closed loop's users (and its request
count) are spread as evenly as they go.
"""

from __future__ import annotations

from dataclasses import replace

from tokenpace.sim.profile import Network, Profile
from tokenpace.sim.virtual import VirtualResult, run_virtual
from tokenpace.sim.virtual_load import VirtualLoad


def _share(total: int, replicas: int, i: int) -> int:
    return total // replicas + (1 if i < total % replicas else 0)


def run_replicated(
    load: VirtualLoad, profile: Profile, network: Network, replicas: int
) -> list[VirtualResult]:
    if replicas <= 1:
        return run_virtual(load, profile, network)
    load.validate()
    merged: list[VirtualResult] = []
    for i in range(replicas):
        if load.rates:
            part = replace(load, rates=tuple(r / replicas for r in load.rates), seed=load.seed + i)
        else:
            users = _share(load.concurrency, replicas, i)
            if users == 0:
                continue
            requests = _share(load.requests, replicas, i) if load.requests else 0
            if load.requests and requests == 0:
                continue
            part = replace(load, concurrency=users, requests=requests, seed=load.seed + i)
        merged += run_virtual(part, profile, network)
    merged.sort(key=lambda r: r.record.sent_ns)
    for k, r in enumerate(merged):  # one run's numbering, in send order
        r.record.index = k
        r.record.request_id = str(k)
    return merged
