"""The router across a live change: ramps keep their start, sticky users keep their arm unless its
weight fell (rendezvous hashing moves only the users a grown arm wins over)."""

from __future__ import annotations

from tokenpace.gateway.config.config import parse_upstream
from tokenpace.gateway.request_path.router import Router

USERS = [f"user-{i}".encode() for i in range(3000)]


def _router(clock: list[float], *specs: str) -> Router:
    return Router([parse_upstream(s) for s in specs], lambda: clock[0])


def _arms(router: Router) -> dict[bytes, str]:
    return {u: router.choose(None, u).arm for u in USERS}


def test_sticky_users_keep_their_arm_unless_its_weight_fell() -> None:
    clock = [0.0]
    before = _router(clock, "a=http://h:1/v1,weight=90", "b=http://h:2/v1,weight=10")
    grown = before.after_change(
        [parse_upstream("a=http://h:1/v1,weight=50"), parse_upstream("b=http://h:2/v1,weight=50")]
    )
    was, now = _arms(before), _arms(grown)
    assert all(now[u] == "b" for u in USERS if was[u] == "b")  # b grew: none of its users left
    assert 0.3 < sum(now[u] == "b" and was[u] == "a" for u in USERS) / len(USERS) < 0.5  # a's moved
    added = grown.after_change([*grown.upstreams, parse_upstream("c=http://h:3/v1,weight=25")])
    with_c = _arms(added)
    assert all(with_c[u] in (now[u], "c") for u in USERS)  # only users c won over moved, to c
    removed = added.after_change(grown.upstreams)
    assert _arms(removed) == now  # c gone: its users back where they were, nobody else moved
    back = grown.after_change(
        [parse_upstream("a=http://h:1/v1,weight=100"), parse_upstream("b=http://h:2/v1,weight=0")]
    )
    assert set(_arms(back).values()) == {"a"}  # b's weight went to zero: its users move


def test_a_ramp_keeps_its_start_across_a_change_and_a_new_upstream_starts_its_own() -> None:
    clock = [0.0]
    router = _router(clock, "a=http://h:1/v1", "b=http://h:2/v1,weight=10,ramp=100s")
    clock[0] = 50.0
    changed = router.after_change([*router.upstreams, parse_upstream("c=http://h:3/v1,weight=10,ramp=100s")])
    b, c = changed.upstreams[1], changed.upstreams[2]
    assert changed.weight(b) == 5.0 and changed.weight(c) == 0.0  # b half way, c just joined
    clock[0] = 100.0
    assert changed.weight(b) == 10.0 and changed.weight(c) == 5.0
