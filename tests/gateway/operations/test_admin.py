"""The admin pages (/metrics, /tokenpace/*): on the proxy's port by default, on their own address
with --admin-listen, behind --admin-key when asked; refusals are counted. The documented command
is run as a user would type it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from tokenpace.gateway.config.config import GatewayConfig, parse_listen, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.procs import free_port, wait_listening
from tokenpace.testing.scripted_server import Script, ScriptedServer

ADMIN = "admin-key-0123456789"
CLIENT = "client-key-0123456789"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
DOCS = Path(__file__).resolve().parents[3] / "docs" / "gateway.md"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def status(s: aiohttp.ClientSession, url: str, key: str | None = None) -> int:
    async with s.get(url, headers=bearer(key) if key else {}) as r:
        await r.read()
        return r.status


def test_admin_pages_apart_and_behind_a_key() -> None:
    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                admin_host="127.0.0.1",
                admin_port=0,
                admin_keys=frozenset({ADMIN}),
                client_keys=frozenset({CLIENT}),
            )
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                assert gw.admin_url != gw.url
                for path in ("/metrics", "/tokenpace/upstreams"):  # not on the proxy port, not forwarded
                    assert await status(s, gw.url + path, CLIENT) == 404
                    assert await status(s, gw.admin_url + path) == 401
                    assert await status(s, gw.admin_url + path, CLIENT) == 401  # client keys do not open it
                    assert await status(s, gw.admin_url + path, ADMIN) == 200
                async with s.post(gw.url + "/v1/chat/completions", json=CHAT, headers=bearer(CLIENT)) as r:
                    assert r.status == 200 and (await r.read()).endswith(b"[DONE]\n\n")
                assert await status(s, gw.url + "/v1/models", ADMIN) == 401  # nor the admin key the proxy
                async with s.get(gw.admin_url + "/metrics", headers=bearer(ADMIN)) as r:
                    text = await r.text()
                assert 'tokenpace_gateway_rejected_requests_total{reason="admin_unauthorized"} 4.0' in text
                assert 'tokenpace_gateway_rejected_requests_total{reason="unauthorized"} 1.0' in text
                assert ADMIN not in text and CLIENT not in text
            assert up.stats.requests == 1  # nothing else reached the upstream

    asyncio.run(asyncio.wait_for(main(), 20))


def test_same_port_by_default_metrics_open_upstreams_view_follows_client_keys() -> None:
    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),), port=0, client_keys=frozenset({CLIENT})
            )
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                assert gw.admin_url == gw.url
                assert await status(s, gw.url + "/metrics") == 200  # Prometheus scrapes as before
                assert await status(s, gw.url + "/tokenpace/upstreams") == 401
                assert await status(s, gw.url + "/tokenpace/upstreams", CLIENT) == 200

    asyncio.run(asyncio.wait_for(main(), 20))


# docs/gateway.md shows this command (ports and file name aside); the test runs it.
DOC_COMMAND = (
    "tokenpace gateway --listen 127.0.0.1:9000 --upstream a=http://127.0.0.1:8000/v1 --no-store \\\n"
    "  --admin-listen 127.0.0.1:9100 --admin-key-file admin.keys \\\n"
    "  --header-timeout 10s --body-timeout 30s --idle-timeout 60s --max-connections 512"
)

DOC_CURL = (
    "curl -H \"Authorization: Bearer $(grep -v '^#' admin.keys | head -1)\" http://127.0.0.1:9100/metrics"
)


def test_documented_admin_command(tmp_path: Path, threaded_server) -> None:
    assert DOC_COMMAND in DOCS.read_text() and DOC_CURL in DOCS.read_text()
    (tmp_path / "admin.keys").write_text(f"# prometheus\n{ADMIN}\n")
    port, admin_port = free_port(), free_port()
    argv = DOC_COMMAND.replace("\\\n", " ").split()[1:]
    argv = [
        a.replace("127.0.0.1:9000", f"127.0.0.1:{port}")
        .replace("127.0.0.1:9100", f"127.0.0.1:{admin_port}")
        .replace("http://127.0.0.1:8000/v1", threaded_server.url)
        for a in argv
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_listening(admin_port, proc)
        asyncio.run(asyncio.wait_for(_check_cli(port, admin_port), 20))
        if shutil.which("curl"):  # the documented scrape, as typed
            curl = DOC_CURL.replace("127.0.0.1:9100", f"127.0.0.1:{admin_port}")
            got = subprocess.run(
                ["bash", "-c", curl], cwd=tmp_path, capture_output=True, text=True, timeout=20
            )
            assert got.returncode == 0 and "tokenpace_gateway_connections_open" in got.stdout, got.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    text = out.decode() + err.decode()
    assert ADMIN not in text and "Traceback" not in text
    assert f"metrics at http://127.0.0.1:{admin_port}/metrics" in text
    assert text.count("tokenpace gateway: answered 401 to 127.0.0.1: admin unauthorized") == 1, text


async def _check_cli(port: int, admin_port: int) -> None:
    async with aiohttp.ClientSession() as s:
        admin = f"http://127.0.0.1:{admin_port}"
        assert await status(s, admin + "/metrics") == 401
        async with s.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT) as r:
            assert r.status == 200
            await r.read()
        ok = 'tokenpace_gateway_requests_total{api="chat",arm="a",model="m",outcome="ok",upstream="a"} 1.0'
        text = ""
        while ok not in text:  # the record is finished just after the client's last byte
            async with s.get(admin + "/metrics", headers=bearer(ADMIN)) as r:
                assert r.status == 200
                text = await r.text()
        assert await status(s, f"http://127.0.0.1:{port}/metrics") == 404


def test_listen_addresses_are_checked() -> None:
    assert parse_listen("127.0.0.1:9100", "--admin-listen") == ("127.0.0.1", 9100)
    assert parse_listen("[::1]:9100", "--admin-listen") == ("::1", 9100)
    for bad in ("9100", "host:", "host:99999", "host:x"):
        try:
            parse_listen(bad, "--admin-listen")
        except ValueError as exc:
            assert "--admin-listen" in str(exc)
        else:
            raise AssertionError(bad)


def test_bad_new_flags_are_one_line_and_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tokenpace.cli.main import cli

    base = ["gateway", "--upstream", "a=http://127.0.0.1:9/v1", "--no-store"]
    empty = tmp_path / "empty.keys"
    empty.write_text("# nothing\n")
    for extra, says in (
        (["--admin-listen", "nowhere"], "--admin-listen"),
        (["--header-timeout", "0s"], "--header-timeout"),
        (["--idle-timeout", "soon"], "soon"),
        (["--max-connections", "0"], "--max-connections"),
        (["--workers", "0"], "--workers"),
        (["--admin-key-file", str(tmp_path / "missing")], "cannot read"),
        (["--admin-key-file", str(empty)], "holds no key"),
    ):
        result = CliRunner().invoke(cli, [*base, *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert says in result.output and "Traceback" not in result.output, (extra, result.output)


PLAYBOOK = DOCS.parent / "playbook.md"


def test_the_playbooks_prometheus_block_scrapes_a_gateway_behind_an_admin_key(tmp_path: Path) -> None:
    """The playbook's scrape config with an admin key: promtool takes it, and the header Prometheus
    makes of it (``type`` and the file's content, trimmed) opens /metrics; a scrape without it is
    told how to pass the key."""
    import re

    import yaml

    (block,) = [b for b in re.findall(r"^```yaml\n(.*?)^```", PLAYBOOK.read_text(), re.S | re.M)
                if "credentials_file" in b]  # fmt: skip
    auth = yaml.safe_load(block)["scrape_configs"][0]["authorization"]
    key_file = tmp_path / "tokenpace-admin.key"
    key_file.write_text(ADMIN + "\n")
    if shutil.which("promtool"):
        config = tmp_path / "prometheus.yml"
        config.write_text(block.replace(auth["credentials_file"], str(key_file)))
        checked = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    header = {"Authorization": f"{auth.get('type', 'Bearer')} {key_file.read_text().strip()}"}

    async def main() -> tuple[int, int, str]:
        config = GatewayConfig(
            upstreams=(parse_upstream("a=http://127.0.0.1:1/v1"),), port=0, admin_keys=frozenset({ADMIN})
        )
        async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
            async with s.get(gw.admin_url + "/metrics", headers=header) as r:
                ok = r.status
            async with s.get(gw.admin_url + "/metrics") as r:
                return ok, r.status, (await r.json())["error"]["message"]

    ok, refused, message = asyncio.run(asyncio.wait_for(main(), 20))
    assert ok == 200 and refused == 401
    assert "Authorization: Bearer ADMIN_KEY" in message and "credentials_file" in message
