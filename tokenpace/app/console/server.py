"""The console's aiohttp server: each page at its path (HTML) and under /api (JSON), static files,
access and headers (``access``). The store is read in worker threads, ``WORKERS`` at a time, with
at most ``QUEUE_MAX`` requests waiting (more: 503); no answer is larger than ``RESPONSE_MAX``; the
pages that cache keep ``CACHE_MAX`` answers, dropped once a run is added or deleted (or what the
page's ``stamp`` says it depends on changes): each answer's JSON, its HTML once asked, and its data
until both are rendered (when small); the pages reuse ``READS_MAX`` reads (``page.Kept``)."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
from aiohttp import web
from numpy import fft, ma, random  # noqa: F401  (numpy loads them on first use: at start, not in an answer)

from tokenpace.adapters.store import RunQuery, Store, StoreError
from tokenpace.app.baseline.store_ops import open_store
from tokenpace.app.console import access
from tokenpace.app.console.page import Ask, BadAsk, Kept, NotFound, Page
from tokenpace.app.console.render import PLOTLY_PATH, plotly_js, render, static_file, warm_up
from tokenpace.app.console.routes import PAGES
from tokenpace.app.run.run_loop import run_event_loop, stop_on_signals

WORKERS = 4  # pages computed at once (threads reading the store)
CACHE_MAX = 64  # answers kept (``_Answer``) of the pages that cache (compare, history, rollout)
CACHE_TTL_S = 60.0  # and for at most this long (a label or baseline edit shows within a minute)
DATA_KEEP_MAX = 256 * 1024  # bytes: an answer whose JSON is no larger keeps its data for its HTML
READS_MAX = 4  # reads the pages reuse (a gateway session's traffic: each guard tried reuses it)
READ_BYTES_MAX = 256 * 1024 * 1024  # about the memory they hold in all; a larger read is not kept
QUEUE_MAX = 32  # requests waiting for a worker; past it 503
RESPONSE_MAX = 16 * 1024 * 1024  # bytes of one page or JSON answer
STATIC = {"/static/console.js": "application/javascript", "/static/console.css": "text/css"}
STATIC["/static/live.js"] = "application/javascript"  # the live page's refresher
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_JSON = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _error(request: web.Request, status: int, message: str) -> web.Response:
    if request.path.startswith("/api/"):
        return web.json_response({"error": message, "status": status}, status=status)
    page = render("error.html", {"status": status, "error": message}, nav=_nav())
    return web.Response(text=page, status=status, content_type="text/html")


def _json(data: dict[str, Any]) -> bytes:
    """The JSON twin: the data without its ``_`` keys (records, objects for the charts)."""
    return orjson.dumps({k: v for k, v in data.items() if not k.startswith("_")}, option=_JSON, default=str)


def _html(page: Page, data: dict[str, Any]) -> str:
    return render(page.template, data, page.charts(data), _nav())


def _nav() -> list[tuple[str, str]]:
    return [(p.path, p.title) for p in PAGES if p.title]


@dataclass(frozen=True, slots=True)
class _Answer:
    """A cached page's answer as computed at ``at``: its JSON, its HTML once asked, and its data
    while the HTML is not rendered yet (only when the JSON is at most ``DATA_KEEP_MAX`` bytes: the
    data's ``_`` keys hold small objects, compare's a deferred read). Replaced, never changed."""

    at: float
    json: bytes
    html: str | None = None
    data: dict[str, Any] | None = None

    def form(self, api: bool) -> bytes | str | None:
        return self.json if api else self.html

    def rendered(self, page: Page, data: dict[str, Any], api: bool) -> tuple[_Answer, bytes | str]:
        """The form asked, and this answer with it (its HTML rendered once asked, then no data)."""
        if api:
            return self, self.json
        html = self.html if self.html is not None else _html(page, data)
        return _Answer(self.at, self.json, html), html


class Console:
    """The pages over one store; ``key``: the access key, None on a loopback address only."""

    def __init__(self, store: Store, key: str | None = None) -> None:
        self.store, self.key = store, key
        self.slots = asyncio.Semaphore(WORKERS)
        self.waiting = 0
        self.cache: OrderedDict[Any, _Answer] = OrderedDict()
        self.cache_lock = threading.Lock()
        self.kept = Kept(READS_MAX, READ_BYTES_MAX, CACHE_TTL_S)

    def _state(self) -> tuple[Any, ...]:
        """The store as far as a cached answer cares: a run or baseline added or deleted changes it."""
        found = self.store.page_runs(RunQuery(limit=1))
        newest = found.runs[0] if found.runs else None
        baselines = tuple((b.name, b.run_id) for b in self.store.baselines())
        return found.total, newest.id if newest else None, newest.stored_unix if newest else None, baselines

    def _answer(self, page: Page, ask: Ask, api: bool) -> bytes | str:
        """The page's JSON (bytes) or HTML (str); a page that caches keeps its answer (``_Answer``):
        the JSON at once (cheap), the HTML only once asked (the figures cost tens of ms)."""
        ask = ask.keeping(self.kept)
        if not page.cached:
            data = page.data(self.store, ask)
            return _json(data) if api else _html(page, data)
        key = (page.name, ask.key(), self._state(), page.stamp(self.store, ask) if page.stamp else None)
        now = time.monotonic()
        with self.cache_lock:
            hit = self.cache.get(key)
            if hit is not None and now - hit.at < CACHE_TTL_S:
                self.cache.move_to_end(key)
            else:
                hit = None
        if hit is not None and (out := hit.form(api)) is not None:
            return out
        if hit is not None and hit.data is not None:  # the JSON's data, kept for its HTML
            answer, out = hit.rendered(page, hit.data, api)
        else:
            data = page.data(self.store, ask)
            first = _json(data)
            kept = _Answer(now, first, data=data if len(first) <= DATA_KEEP_MAX else None)
            answer, out = kept.rendered(page, data, api)
        with self.cache_lock:
            self.cache[key] = answer
            self.cache.move_to_end(key)
            while len(self.cache) > CACHE_MAX:
                self.cache.popitem(last=False)
        return out

    async def _compute(self, page: Page, ask: Ask, api: bool) -> bytes | str:
        if self.waiting >= QUEUE_MAX:
            raise web.HTTPServiceUnavailable(text="the console is busy: try again")
        self.waiting += 1
        try:
            async with self.slots:
                return await asyncio.to_thread(self._answer, page, ask, api)
        finally:
            self.waiting -= 1

    def handler(self, page: Page, api: bool) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            ask = Ask(list(request.query.items()), request.match_info)
            try:
                out = await self._compute(page, ask, api)
            except BadAsk as exc:
                return _error(request, 400, str(exc))
            except NotFound as exc:
                return _error(request, 404, str(exc.args[0] if exc.args else exc))
            except StoreError as exc:
                return _error(request, 503, str(exc))
            if isinstance(out, bytes):
                return _sized(web.Response(body=out, content_type="application/json"))
            return _sized(web.Response(text=out, content_type="text/html"))

        return handle

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in access.READ_METHODS:
            raise web.HTTPMethodNotAllowed(request.method, list(access.READ_METHODS))
        if self.key is None and not access.host_is_local(request.host):
            return _error(request, 403, "this console answers only to localhost / 127.0.0.1")
        if self.key is not None:
            given = request.query.get("key")
            if given is not None:
                if not access.same_key(given, self.key):
                    return _error(request, 401, "wrong access key")
                rest = [(k, v) for k, v in request.query.items() if k != "key"]
                resp = web.HTTPSeeOther(request.path + (f"?{urlencode(rest)}" if rest else ""))
                resp.set_cookie(access.KEY_COOKIE, self.key, httponly=True, samesite="Strict", path="/")
                raise resp
            header = access.bearer(request.headers.get("Authorization"))
            if not (
                access.same_key(header, self.key)
                or access.same_key(request.cookies.get(access.KEY_COOKIE), self.key)
            ):
                return _error(
                    request,
                    401,
                    "an access key is needed: open the console's URL with ?key=KEY once, "
                    "or send Authorization: Bearer KEY",
                )
        return await handler(request)


def _sized(resp: web.Response) -> web.Response:
    if resp.body is not None and len(resp.body) > RESPONSE_MAX:  # type: ignore[arg-type]
        return web.json_response({"error": "the answer is larger than the console sends"}, status=500)
    return resp


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        resp = exc
    resp.headers.update(access.HEADERS)
    if not request.path.startswith("/static/"):
        resp.headers.setdefault("Cache-Control", "no-store")
    if isinstance(resp, web.HTTPException):
        raise resp
    return resp


def build_app(store: Store, key: str | None = None) -> web.Application:
    """The console's application (tests serve it on a test port)."""
    console = Console(store, key)
    app = web.Application(middlewares=[_headers, console.guard], client_max_size=1024)
    for page in PAGES:
        app.router.add_get(page.path, console.handler(page, api=False))
        app.router.add_get("/api" + page.path, console.handler(page, api=True))

    async def home(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(PAGES[0].path)

    async def plotly(request: web.Request) -> web.StreamResponse:
        resp = web.Response(body=plotly_js(), content_type="application/javascript")
        resp.headers["Cache-Control"] = "max-age=86400"
        resp.enable_compression()
        return resp

    def static(path: str, kind: str) -> Handler:
        body = static_file(path.rsplit("/", 1)[1])

        async def serve(request: web.Request) -> web.StreamResponse:
            return web.Response(body=body, content_type=kind, headers={"Cache-Control": "no-cache"})

        return serve

    app.router.add_get("/", home)
    app.router.add_get(PLOTLY_PATH, plotly)
    for path, kind in STATIC.items():
        app.router.add_get(path, static(path, kind))
    return app


def _to_stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def start_up() -> None:
    """What the console does before it listens: loads what the first answers would (``warm_up``),
    then takes the start-up objects (modules, plotly's classes) out of the garbage collector's
    full collections: they live as long as the process, and a full collection, which a page's
    allocations trigger now and then, would otherwise walk them all within that page's answer."""
    warm_up()
    gc.collect()
    gc.freeze()


def serve_console(
    store_url: str | None,
    host: str = "127.0.0.1",
    port: int = 8089,
    key_file: Path | None = None,
    say: Callable[[str], None] = _to_stdout,
) -> None:
    """Serve until SIGINT/SIGTERM; ConsoleRefused or StoreError before listening."""
    key = access.read_key(key_file) if key_file is not None else None
    access.check_listen(host, key)
    store = open_store(store_url, existing=True)
    start_up()
    try:
        run_event_loop(_serve(store, host, port, key, say))
    finally:
        store.close()


async def _serve(store: Store, host: str, port: int, key: str | None, say: Callable[[str], None]) -> None:
    runner = web.AppRunner(build_app(store, key), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise access.ConsoleRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        shown = f"[{host}]" if ":" in host else host
        say(f"tokenpace ui: serving {store.display_url} at http://{shown}:{port}/runs (Ctrl-C stops)")
        stopped = asyncio.Event()
        stop_on_signals(lambda reason: stopped.set())
        await stopped.wait()
    finally:
        await runner.cleanup()
