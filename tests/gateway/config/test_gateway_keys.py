"""Gateway keys for clients: without a valid key a request gets an OpenAI-style 401 and is never
forwarded or recorded; the key appears in no record, metric or repr. Credentials in an upstream URL
become the upstream's Basic auth (unless the client sent its own) and are never shown."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import aiohttp
import orjson
import pytest

from gateway.request_path.test_gateway import FixedUpstream
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.config.secrets import read_key_file
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
KEY = "gw-key-0123456789"


def test_client_keys_gate_requests(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(f"# clients\n\n{KEY}\nother-key\n")
    assert read_key_file(str(key_file)) == [KEY, "other-key"]
    records: list[RequestRecord] = []

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(
                upstreams=(parse_upstream(f"a={up.url}"),),
                port=0,
                client_keys=frozenset(read_key_file(str(key_file))),
                records_path=str(tmp_path / "records.jsonl"),
            )
            assert KEY not in repr(config)
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                url = gw.url + "/v1/chat/completions"
                for headers in (
                    {},
                    {"Authorization": "Bearer wrong"},
                    {"Authorization": KEY},  # no Bearer scheme
                    {"Authorization": f"Bearer {KEY}x"},
                ):
                    async with s.post(url, json=CHAT, headers=headers) as r:
                        assert r.status == 401
                        assert r.headers["WWW-Authenticate"] == "Bearer"
                        err = (await r.json())["error"]
                        assert err["code"] == "invalid_api_key" and KEY not in err["message"]
                async with s.get(gw.url + "/v1/models") as r:  # every proxied path is gated
                    assert r.status == 401
                assert up.stats.requests == 0 and records == []
                for key in (KEY, "other-key"):
                    async with s.post(url, json=CHAT, headers={"Authorization": f"Bearer {key}"}) as r:
                        assert r.status == 200
                        await r.read()
                async with s.get(gw.url + "/metrics") as r:  # Prometheus scrapes without a key
                    assert r.status == 200
                    metrics = await r.text()
            assert len(records) == 2
            assert KEY not in metrics

    asyncio.run(main())
    stored = (tmp_path / "records.jsonl").read_bytes()
    assert len(stored.splitlines()) == 2 and KEY.encode() not in stored
    assert all(KEY not in orjson.dumps(r.to_dict()).decode() for r in records)


def test_credentials_in_upstream_url_become_basic_auth_unless_the_client_sent_its_own() -> None:
    up = parse_upstream("a=http://us%40er:p%3Aw@127.0.0.1:8000/v1")
    assert up.url == "http://127.0.0.1:8000/v1" and up.origin == "http://127.0.0.1:8000"
    assert "p%3Aw" not in repr(up) and "p:w" not in repr(up)
    assert up.auth == "Basic " + base64.b64encode(b"us@er:p:w").decode()
    with pytest.raises(ValueError) as bad:
        parse_upstream("a=ftp://user:secretpw@h/v1")
    assert "secretpw" not in str(bad.value)

    async def main() -> tuple[list[int], list[dict[str, str]]]:
        async with FixedUpstream() as fixed:
            url = fixed.url.replace("http://", "http://user:pw@")
            config = GatewayConfig(upstreams=(parse_upstream(f"up={url}"),), port=0)
            statuses = []
            async with RunningGateway(config) as gw, aiohttp.ClientSession() as s:
                for headers in ({}, {"Authorization": "Bearer client-own"}):
                    async with s.post(
                        gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
                    ) as r:
                        await r.read()
                        statuses.append(r.status)
            return statuses, fixed.seen_headers

    statuses, seen = asyncio.run(asyncio.wait_for(main(), 30))
    assert statuses == [200, 200]
    assert seen[0]["Authorization"] == "Basic " + base64.b64encode(b"user:pw").decode()
    assert seen[1]["Authorization"] == "Bearer client-own"  # the client's own header wins, unchanged


def test_request_secrets_cover_every_form_a_credential_is_carried_in() -> None:
    from tokenpace.gateway.config.secrets import request_secrets

    got = set(
        request_secrets(
            {"authorization": "Bearer tok-123456", "x-api-key": "xk-123456", "api-key": "ak-123456"},
            "model=m&key=qk-123456",
            "user:pw-123456",
        )
    )
    assert {"tok-123456", "xk-123456", "ak-123456", "qk-123456", "pw-123456"} <= got
    assert "Bearer tok-123456" not in got  # the scheme stays readable: "Bearer ***"
    assert set(request_secrets({"authorization": "bare-token-1"})) == {"bare-token-1"}
    assert request_secrets({}) == ()
