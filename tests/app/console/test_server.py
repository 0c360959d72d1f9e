"""The server's cache: a page that caches (compare, history) computes once per query while the store
is unchanged, keeps its JSON and renders its HTML only once asked (from the data kept for it, then
dropped; a large answer's data is not kept), and computes again once a run is added."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from app.console.console_fixtures import make_store, save
from tokenpace.adapters.store import Store
from tokenpace.app.console import server
from tokenpace.app.console.page import Ask, Chart, Page
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


def _counted(calls: dict[str, int]) -> Page:
    """A cached page counting its data computed and its figures drawn (the HTML's cost)."""

    def data(store: Store, ask: Ask) -> dict:
        calls["data"] += 1
        return {"status": ask.text("a"), "error": "x" * int(ask.text("n", "0")), "_private": object()}

    def charts(data: dict) -> list[Chart]:
        calls["charts"] += 1
        return [Chart("c", go.Figure(go.Scatter(y=[1, 2])))]

    return Page("t", "/t", "error.html", data, charts=charts, cached=True)


def test_the_json_twin_renders_no_html_and_the_html_asked_next_reuses_its_data(tmp_path: Path) -> None:
    store = make_store(tmp_path / "runs.db")
    calls = {"data": 0, "charts": 0}
    page, console = _counted(calls), Console(store)
    ask = Ask([("a", "x")], {})
    assert console._answer(page, ask, api=True) == b'{"status":"x","error":""}'
    assert calls == {"data": 1, "charts": 0}  # the figures are not drawn for the JSON
    html = console._answer(page, ask, api=False)
    assert calls == {"data": 1, "charts": 1}  # drawn from the data kept, not computed again
    fresh = Console(store)._answer(page, ask, api=False)
    assert isinstance(html, str) and html == fresh and "<h1>x</h1>" in html
    (kept,) = (a for a in console.cache.values() if a.json.startswith(b'{"status":"x"'))
    assert kept.data is None and kept.html == html  # both forms rendered: the data is let go
    assert console._answer(page, ask, api=False) == html and console._answer(page, ask, api=True)
    assert calls == {"data": 2, "charts": 2}  # (the fresh console's) and nothing more
    store.close()


def test_the_html_first_keeps_the_json_and_a_large_answer_keeps_no_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(tmp_path / "runs.db")
    calls = {"data": 0, "charts": 0}
    page, console = _counted(calls), Console(store)
    console._answer(page, Ask([("a", "h")], {}), api=False)
    assert console._answer(page, Ask([("a", "h")], {}), api=True) == b'{"status":"h","error":""}'
    assert calls == {"data": 1, "charts": 1}
    assert all(a.data is None for a in console.cache.values())
    monkeypatch.setattr(server, "DATA_KEEP_MAX", 100)
    big = Ask([("a", "big"), ("n", "200")], {})
    assert len(console._answer(page, big, api=True)) > 200
    assert all(a.data is None for a in console.cache.values())  # too large to keep for its HTML
    assert "<h1>big</h1>" in console._answer(page, big, api=False)
    assert calls == {"data": 3, "charts": 2}  # computed again for the HTML, then both kept
    assert console._answer(page, big, api=False) and calls == {"data": 3, "charts": 2}
    store.close()


def test_racing_requests_for_one_answer_each_get_the_right_form(tmp_path: Path) -> None:
    store = make_store(tmp_path / "runs.db")
    calls = {"data": 0, "charts": 0}
    page, console = _counted(calls), Console(store)
    ask = Ask([("a", "r")], {})
    expected = {
        True: console._answer(page, ask, api=True),
        False: Console(store)._answer(page, ask, api=False),
    }
    console.cache.clear()
    forms = [i % 2 == 0 for i in range(16)]
    with ThreadPoolExecutor(max_workers=server.WORKERS) as pool:
        got = list(pool.map(lambda api: console._answer(page, ask, api), forms))
    assert got == [expected[api] for api in forms]  # maybe computed more than once, never mixed
    (kept,) = console.cache.values()
    assert kept.form(True) == expected[True] and kept.form(False) in (None, expected[False])
    store.close()
