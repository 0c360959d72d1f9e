"""The console's compare and history pages as one offline HTML file each (``report --compare A B
--html FILE``, ``report --history RUN --html FILE``): the same data function and template as the
served page, with plotly.js and the console's script inside the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenpace.adapters.safe_files import check_output, write_atomic
from tokenpace.adapters.store import StoreError
from tokenpace.app.baseline.store_ops import open_store
from tokenpace.app.console.page import Ask, NotFound
from tokenpace.app.console.render import render
from tokenpace.app.console.routes import PAGES

OFFLINE_PAGES = ("compare", "history", "rollout")


def write_offline_page(
    store_url: str | None, name: str, query: Sequence[tuple[str, str]], path: Path
) -> None:
    """The page ``name`` with ``query`` (as its URL's query string) written to ``path``; raises
    ValueError (a bad filter, no such run: one line) or OSError (the path)."""
    if name not in OFFLINE_PAGES:
        raise ValueError(f"no offline {name} page (offline pages: {', '.join(OFFLINE_PAGES)})")
    page = next(p for p in PAGES if p.name == name)
    check_output(path, "--html")
    store = open_store(store_url, existing=True)
    try:
        asked = [*query, ("exact", "1")] if name == "compare" else list(query)  # a report: the bootstrap
        data = page.data(store, Ask(asked, {}))
        text = render(page.template, data, page.charts(data), offline=True)
    except NotFound as exc:
        raise ValueError(str(exc.args[0] if exc.args else exc)) from None
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    finally:
        store.close()
    write_atomic(path, text.encode())
