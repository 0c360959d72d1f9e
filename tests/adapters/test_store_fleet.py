"""A fleet's desired configuration in the store (adapters/store/fleet.py), on SQLite and PostgreSQL:
the first replica's configuration becomes epoch 0, a later one joins what is there, and of two
changes made on the same epoch exactly one wins (its change row stored with it)."""

from __future__ import annotations

import threading

from baseline_fixtures import pg_server, store_url  # noqa: F401

from tokenpace.adapters.store import connect
from tokenpace.core.events import ConfigChange


def _change(epoch: int, who: str) -> ConfigChange:
    return ConfigChange("sess", epoch, 1000.0 + epoch, who, ("weights",), {}, {"split": []})


def test_join_then_compare_and_set(store_url: str) -> None:  # noqa: F811
    first, second = connect(store_url), connect(store_url)
    assert first.fleet_epoch("f") is None and first.fleet_config("f") is None
    joined = first.join_fleet("f", {"w": 1})
    assert (joined.epoch, joined.desired) == (0, {"w": 1})
    assert second.join_fleet("f", {"w": 2}).desired == {"w": 1}  # the fleet's, not its own
    assert first.set_fleet_config("f", {"w": 3}, _change(1, "one"))
    assert not second.set_fleet_config("f", {"w": 4}, _change(1, "two"))  # epoch 1 is taken
    assert not second.set_fleet_config("f", {"w": 4}, _change(3, "two"))  # no skipping an epoch
    assert second.set_fleet_config("f", {"w": 5}, _change(2, "two"))
    state = first.fleet_config("f")
    assert state is not None and (state.epoch, state.desired) == (2, {"w": 5})
    assert [c.who for c in first.load_config_changes(0)] == ["one", "two"]  # the losers left none
    assert first.join_fleet("g", {"w": 9}).epoch == 0 and first.fleet_epoch("f") == 2


def test_concurrent_changes_on_one_epoch_one_wins(store_url: str) -> None:  # noqa: F811
    stores = [connect(store_url) for _ in range(6)]
    stores[0].join_fleet("f", {})
    won: list[int] = []
    gate = threading.Barrier(len(stores))

    def change(i: int) -> None:
        gate.wait()
        if stores[i].set_fleet_config("f", {"by": i}, _change(1, f"r{i}")):
            won.append(i)

    threads = [threading.Thread(target=change, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1
    state = stores[0].fleet_config("f")
    assert state is not None and state.desired == {"by": won[0]}
    assert len(stores[0].load_config_changes(0)) == 1
