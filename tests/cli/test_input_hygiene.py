"""Header injection, credentials in URLs and echoed keys: refused before any load, sent as Basic
auth, and never kept in a result, a record, the store or a message (issue 13, items 5 and 6)."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import FAULTS, ThreadedServer

from tokenpace.core.credentials import (
    header_problem,
    redact_userinfo,
    request_headers,
    scrub_secrets,
    secrets_of,
    split_credentials,
)
from tokenpace.gateway.config.config import parse_upstream
from tokenpace.testing.procs import FINISHED
from tokenpace.testing.scripted_server import Script, ScriptedServer
from tokenpace.wire.endpoint import parse_endpoint

SECRET = "sk-topsecret-0123456789"
PASSWORD = "pa55-w0rd-XYZ"


def tokenpace(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "tokenpace", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def bench(url, tmp_path, *extra, env=None):
    out = tmp_path / "r.json"
    p = tokenpace(
        "bench", "--url", url, "--model", "ok", "-c", "2", "-n", "4", "--output-len", "4",
        "--server-metrics", "off", "--store", str(tmp_path / "runs.db"), "--out", str(out), "-q",
        *extra, env=env,
    )  # fmt: skip
    return p, out


def everything_written(tmp_path) -> str:
    """Every byte the run left: result, records, store (raw SQLite pages)."""
    return "".join(f.read_bytes().decode("latin-1") for f in tmp_path.iterdir() if f.is_file())


@pytest.fixture
def echo_server():
    """The scripted server, plus a model whose 401 error repeats the request's headers."""
    scripts = {**FAULTS, "echo401": Script(http_status=401, echo_headers=True)}
    with ThreadedServer(ScriptedServer(FAULTS["ok"], scripts=scripts)) as server:
        yield server


# --- header injection: refused before any load, the value never shown ---


@pytest.mark.parametrize(
    "args, env",
    [
        (["--header", "X-Tenant:a\r\nX-Injected: 1"], None),
        (["--header", "X-Tenant:a\nX-Injected: 1"], None),
        (["--header", "X-Tenant:a\x1bb"], None),
        (["--header", "X Injected:1"], None),
        (["--request-id-prefix", "job-\r\nX-Injected: 1"], None),
        (["--api-key", SECRET + "\n"], None),
        (["--api-key", SECRET + "\r"], None),
        ([], {"OPENAI_API_KEY": SECRET + "\n"}),
    ],
)
def test_control_characters_in_headers_are_refused_before_any_load(threaded_server, tmp_path, args, env):
    p, out = bench(threaded_server.url, tmp_path, *args, env=env)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert any(flag in lines[0] for flag in ("--header", "--api-key / OPENAI_API_KEY", "--request-id-prefix"))
    assert "X-Injected" not in p.stderr and SECRET not in p.stderr and "a\r" not in p.stderr
    assert threaded_server.stats.requests == 0  # nothing was sent
    assert not out.exists()


def test_a_header_without_a_colon_is_refused_without_echoing_it(threaded_server, tmp_path):
    p, _ = bench(threaded_server.url, tmp_path, "--header", f"Authorization Bearer {SECRET}")
    assert p.returncode == 2 and SECRET not in p.stderr and "--header" in p.stderr
    assert threaded_server.stats.requests == 0


def test_plain_headers_and_tabs_are_sent_as_given(threaded_server, tmp_path):
    p, _ = bench(threaded_server.url, tmp_path, "--header", "X-Tenant: acme\tblue")
    assert p.returncode in FINISHED, p.stderr
    received = list(threaded_server.stats.headers)
    assert received and all(h.get("x-tenant") == b"acme\tblue" for h in received)
    assert not any("x-injected" in h for h in received)


# --- credentials a server echoes back are scrubbed from everything kept ---


def test_a_key_echoed_in_a_server_error_is_not_kept(echo_server, tmp_path):
    p, _ = bench(echo_server.url, tmp_path, "--model", "echo401", "--api-key", SECRET)
    assert p.returncode == 4, p.stderr  # every request was refused: no success
    assert any(h.get("authorization") == f"Bearer {SECRET}".encode() for h in echo_server.stats.headers)
    records = [json.loads(line) for line in (tmp_path / "r.records.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "http_error" for r in records)
    assert all("Bearer ***" in r["error"] for r in records)  # the server's text, minus the key
    kept = everything_written(tmp_path)
    assert "sk-topsecret" not in kept and "0123456789" not in kept
    assert SECRET not in p.stdout + p.stderr
    stored = sqlite3.connect(tmp_path / "runs.db").execute("select count(*) from records").fetchone()
    assert stored == (4,)  # the records are in the store, and the raw bytes above hold no key


def test_scrub_secrets_hides_known_and_typical_credentials():
    text = (
        "HTTP 400: Missing expected CR after header value: b'Authorization: Bearer sk-abcdef123456'; "
        'x-api-key: k-123; {"api_key": "zz-99"}; Basic dXNlcjpwYXNzd29yZA==; user mypass1 '
        "at http://u:pw@host/v1; basic auth is fine"
    )
    scrubbed = scrub_secrets(text, ["mypass1"])
    for secret in ("sk-abcdef123456", "k-123", "zz-99", "dXNlcjpwYXNzd29yZA", "mypass1", "u:pw@"):
        assert secret not in scrubbed
    assert "basic auth is fine" in scrubbed and "http://***@host/v1" in scrubbed
    assert scrub_secrets(None) is None and scrub_secrets("HTTP 500: overloaded") == "HTTP 500: overloaded"


def test_header_problem_never_includes_the_value():
    problem = header_problem("Authorization", f"Bearer {SECRET}\r\nX-Injected: 1")
    assert problem and SECRET not in problem and "Injected" not in problem
    assert header_problem("Authorization", f"Bearer {SECRET}") is None
    assert header_problem("X", "a\x00b")  # NUL (which no command line can carry) too
    assert header_problem("X-Name\n", "v") and header_problem("X:Y", "v")


# --- credentials in URLs: sent as Basic auth, shown nowhere ---


def test_url_credentials_are_sent_as_basic_auth_and_shown_nowhere(threaded_server, tmp_path):
    port = threaded_server.port
    url = f"http://bob:{PASSWORD}@127.0.0.1:{port}/v1"
    p, out = bench(url, tmp_path)
    assert p.returncode in FINISHED, p.stderr
    basic = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    received = list(threaded_server.stats.headers)
    assert received and all(h.get("authorization") == basic.encode() for h in received)
    result = json.loads(out.read_text())
    assert result["conditions"]["endpoint"] == f"http://127.0.0.1:{port}/v1"
    assert PASSWORD not in everything_written(tmp_path)
    assert PASSWORD not in p.stdout + p.stderr  # the dashboard shows the URL without them
    assert f"127.0.0.1:{port}/v1" in p.stdout


def test_an_api_key_wins_over_url_credentials(threaded_server, tmp_path):
    url = f"http://bob:{PASSWORD}@127.0.0.1:{threaded_server.port}/v1"
    p, _ = bench(url, tmp_path, "--api-key", SECRET)
    assert p.returncode in FINISHED, p.stderr
    assert all(h.get("authorization") == f"Bearer {SECRET}".encode() for h in threaded_server.stats.headers)


def test_cannot_reach_names_the_url_without_its_password(tmp_path):
    p, _ = bench(f"http://bob:{PASSWORD}@127.0.0.1:9/v1", tmp_path)
    assert p.returncode == 2
    assert "http://127.0.0.1:9/v1" in p.stderr and PASSWORD not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_endpoint_and_shared_helpers():
    ep = parse_endpoint(f"http://bob:{PASSWORD}@[::1]:8000/v1?api-version=1")
    assert ep.url == "http://[::1]:8000/v1?api-version=1" and ep.auth and ep.auth.startswith("Basic ")
    assert PASSWORD not in repr(ep)
    with pytest.raises(ValueError) as bad_port:
        parse_endpoint(f"http://bob:{PASSWORD}@host:port/v1")
    assert PASSWORD not in str(bad_port.value)
    assert split_credentials("http://host/v1") == ("http://host/v1", None)
    assert redact_userinfo(f"x=http://bob:{PASSWORD}@h/v1,weight=abc") == "x=http://***@h/v1,weight=abc"
    sent = request_headers({"authorization": "Bearer mine"}, None, "Basic Ym9iOnB3")
    assert sent == {"authorization": "Bearer mine"}  # an Authorization given is never replaced
    assert "pw" in secrets_of({"Authorization": "Basic Ym9iOnB3"})  # the decoded password too


# --- the gateway: the same helper, no password in any message ---


def test_gateway_upstream_credentials_are_split_off_by_the_shared_helper():
    up = parse_upstream(f"a=http://bob:{PASSWORD}@127.0.0.1:8000/v1,weight=2")
    assert (
        up.url == "http://127.0.0.1:8000/v1"
        and up.auth == split_credentials(f"http://bob:{PASSWORD}@127.0.0.1:8000/v1")[1]
    )


@pytest.mark.parametrize(
    "upstream",
    [
        f"x=http://bob:{PASSWORD}@127.0.0.1:8000/v1,weight=abc",
        f"x=http://bob:{PASSWORD}@127.0.0.1:8000/v1,weight=nan",
        f"x=http://bob:{PASSWORD}@127.0.0.1:8000/v1,colour=red",
        f"http://bob:{PASSWORD}@127.0.0.1:8000/v1",
        f"x=http://bob:{PASSWORD}@127.0.0.1:8000/v1,metrics=ftp://bob:{PASSWORD}@h/m",
        f"x=http://bob:{PASSWORD}@127.0.0.1:8000/v1\r\nX-Injected: 1",
    ],
)
def test_gateway_refuses_a_bad_upstream_without_echoing_its_password(upstream):
    p = tokenpace("gateway", "--upstream", upstream, "--no-store", timeout=30)
    assert p.returncode == 2
    assert PASSWORD not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_gateway_refuses_a_client_key_with_a_control_character(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"{SECRET}\x00x\n")
    p = tokenpace(
        "gateway", "--upstream", "a=http://127.0.0.1:9/v1", "--client-key-file", str(keys), "--no-store",
        timeout=30,
    )  # fmt: skip
    assert p.returncode == 2 and SECRET not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_gateway_records_scrub_a_key_an_upstream_echoes(tmp_path):
    import asyncio

    import aiohttp
    from aiohttp import web

    from tokenpace.gateway.config.config import GatewayConfig
    from tokenpace.gateway.lifecycle.serve import RunningGateway

    async def upstream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        echo = f"invalid key: Authorization: {request.headers.get('Authorization')}"
        await resp.write(b"data: " + json.dumps({"error": {"message": echo}}).encode() + b"\n\n")
        await resp.write_eof()
        return resp

    async def main() -> list:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", upstream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        records: list = []
        up = parse_upstream(f"up=http://bob:{PASSWORD}@127.0.0.1:{port}/v1")
        config = GatewayConfig(upstreams=(up,), port=0, records_path=str(tmp_path / "rec.jsonl"))
        try:
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
                headers = {"Authorization": f"Bearer {SECRET}"}
                async with s.post(gw.url + "/v1/chat/completions", json=body, headers=headers) as r:
                    await r.read()
        finally:
            await runner.cleanup()
        return records

    (record,) = asyncio.run(asyncio.wait_for(main(), 30))
    assert record.error and "Bearer ***" in record.error and SECRET not in record.error
    kept = (tmp_path / "rec.jsonl").read_text()
    assert SECRET not in kept and "0123456789" not in kept and PASSWORD not in kept
