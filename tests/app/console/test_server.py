"""The server's cache: a page that caches (compare, history) computes once per query while the store
is unchanged, keeps its JSON and HTML (not its data), and computes again once a run is added."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.console.console_fixtures import make_store, save
from tokenpace.app.console.page import Ask, Page
from tokenpace.app.console.server import Console


def test_a_cached_page_is_computed_again_only_when_the_store_changes(tmp_path: Path) -> None:
    store = make_store(tmp_path / "runs.db")
    calls: list[str] = []

    def data(store, ask: Ask) -> dict:
        calls.append(ask.text("a"))
        return {"status": len(calls), "error": "", "_private": object()}

    page = Page("t", "/t", "error.html", data, cached=True)
    console = Console(store)
    first = console._answer(page, Ask([("a", "x")], {}), api=True)
    assert console._answer(page, Ask([("a", "x")], {}), api=True) == first == b'{"status":1,"error":""}'
    assert "<h1>1</h1>" in console._answer(page, Ask([("a", "x")], {}), api=False)  # kept with the JSON
    console._answer(page, Ask([("a", "y")], {}), api=True)
    assert calls == ["x", "y"]
    save(store, "late01", 20, 100.0, np.random.default_rng(1))
    assert console._answer(page, Ask([("a", "x")], {}), api=True) == b'{"status":3,"error":""}'
    assert calls == ["x", "y", "x"]
    store.close()
