"""Nothing in the console changes the store: only GET and HEAD are answered. Beyond loopback it
needs an access key (bearer header, or the cookie set once from ?key=); without a key it answers
only to a Host that names this machine. Every answer forbids inline script."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.console.console_fixtures import make_store
from tokenpace.app.console.access import KEY_COOKIE, ConsoleRefused, check_listen, read_key
from tokenpace.app.console.render import PLOTLY_PATH
from tokenpace.app.console.server import build_app

KEY = "k" * 12 + "-secret-1234"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = make_store(tmp_path_factory.mktemp("access") / "runs.db")
    yield s
    s.close()


def test_writes_are_refused_everywhere_and_the_store_is_unchanged(store) -> None:
    before = [(r.id, r.labels) for r in store.list_runs()]

    async def go() -> list[int]:
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            codes = []
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                for path in ("/runs", "/api/runs", "/runs/night01", PLOTLY_PATH, "/nowhere"):
                    resp = await client.request(method, path, data=b"label=x")
                    assert resp.headers["Allow"] == "GET,HEAD"
                    codes.append(resp.status)
            return codes

    assert set(asyncio.run(go())) == {405}
    assert [(r.id, r.labels) for r in store.list_runs()] == before


def test_a_key_is_needed_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(ConsoleRefused, match="needs --access-key-file"):
        check_listen("0.0.0.0", None)
    check_listen("127.0.0.1", None)
    check_listen("::1", None)
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(ConsoleRefused, match="at least 16"):
        read_key(short)
    good = tmp_path / "key"
    good.write_text(KEY + "\n")
    assert read_key(good) == KEY


def test_with_a_key_only_its_holders_read(store) -> None:
    async def go() -> dict[str, object]:
        async with TestClient(TestServer(build_app(store, key=KEY), host="127.0.0.1")) as client:
            out: dict[str, object] = {}
            out["none"] = (await client.get("/api/runs")).status
            out["wrong"] = (await client.get("/api/runs", headers={"Authorization": "Bearer nope"})).status
            out["bearer"] = (await client.get("/api/runs", headers={"Authorization": f"Bearer {KEY}"})).status
            resp = await client.get(f"/runs?valid=no&key={KEY}", allow_redirects=False)
            out["redirect"] = (resp.status, resp.headers["Location"], KEY_COOKIE in resp.cookies)
            out["httponly"] = resp.cookies[KEY_COOKIE]["httponly"]
            out["cookie"] = (await client.get("/api/runs")).status  # the client keeps the cookie
            out["wrong_query"] = (await client.get("/runs?key=nope")).status
            return out

    out = asyncio.run(go())
    assert out["none"] == 401 and out["wrong"] == 401 and out["bearer"] == 200
    assert out["redirect"] == (303, "/runs?valid=no", True)  # the key leaves the URL at once
    assert out["httponly"] and out["cookie"] == 200 and out["wrong_query"] == 401


def test_without_a_key_another_host_name_is_refused_and_headers_forbid_inline_script(store) -> None:
    async def go() -> tuple[int, int, dict[str, str]]:
        async with TestClient(TestServer(build_app(store), host="127.0.0.1")) as client:
            rebound = (await client.get("/api/runs", headers={"Host": "evil.example:8089"})).status
            resp = await client.get("/runs")
            return rebound, resp.status, dict(resp.headers)

    rebound, ok, headers = asyncio.run(go())
    assert rebound == 403 and ok == 200
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"].split("script-src")[1].split(";")[0]
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"
