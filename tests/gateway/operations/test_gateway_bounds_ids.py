"""Hostile clients (issue 28 items 4, 11): header bytes that are not Latin-1 or not UTF-8, and a
client reusing another's request id, beside healthy traffic (bounds_harness.py)."""

from __future__ import annotations

import asyncio
import base64

import aiohttp
import orjson
import pytest

from gateway.bounds_harness import ADMIN_KEY, assert_healthy_beside, beside, run_bounds
from gateway.hostile_upstream import HEALTHY, HostileUpstream
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway

BODY = b'{"model":"plain-header","messages":[{"role":"user","content":"hi"}],"stream":true}'
ODD_HEADERS = ["X-Note: €".encode(), b"x-user-id: \xff\xfe", "x-request-id: €-id".encode()]


async def raw_request(port: int, path: bytes, extra: bytes, method: bytes = b"POST") -> bytes:
    body = BODY if method == b"POST" else b""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = b"%b %b HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nContent-Type: application/json\r\n" % (
        method,
        path,
    )
    writer.write(head + b"Content-Length: %d\r\n%b\r\n\r\n%b" % (len(body), extra, body))
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


@pytest.mark.timing
def test_header_bytes_that_are_not_latin1_are_forwarded_unchanged_and_recorded(tmp_path) -> None:

    async def hostile(gw: RunningGateway) -> list[bytes]:
        return [await raw_request(gw.port, b"/v1/chat/completions", h) for h in ODD_HEADERS]

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        answers, healthy = await beside(s, gw.url, gw.admin_url, hostile(gw))
        assert_healthy_beside(healthy, direct)
        for answer in answers:  # never a 500: the request went through
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"0\r\n\r\n"), answer[:200]
            assert b"".join(HEALTHY[-1:]) in answer
        # an admin key that is not ASCII is a wrong key: 401, not 500
        admin = await raw_request(gw.port, b"/metrics", b"Authorization: Bearer \xff\xfe\x80", b"GET")
        assert admin.startswith(b"HTTP/1.1 401 "), admin[:80]

    records = run_bounds(tmp_path, body, admin_keys=frozenset({ADMIN_KEY}))
    odd = [r for r in records if r.labels["model"] == "plain-header"]
    assert len(odd) == 3 and all(r.labels["outcome"] == "ok" for r in odd)  # always a record
    assert odd[2].labels["client_request_id"] == "€-id"  # kept apart, as valid UTF-8
    assert odd[1].labels["user"]  # the sticky key's bytes were hashed, whatever they were
    text = (tmp_path / "records.jsonl").read_text()
    assert text.count('"model":"plain-header"') == 3


def test_odd_header_bytes_reach_the_upstream_byte_for_byte() -> None:
    async def main() -> list[bytes]:
        async with HostileUpstream() as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0)
            async with RunningGateway(config) as gw:
                for h in ODD_HEADERS:
                    await raw_request(gw.port, b"/v1/chat/completions", h)
            return up.seen_heads

    heads = asyncio.run(asyncio.wait_for(main(), 30))
    for h in ODD_HEADERS[:2]:  # x-request-id is the client's to send on, too
        assert any(h + b"\r\n" in head for head in heads), h
    assert any(": €-id\r\n".encode() in head for head in heads)  # (its name's case is aiohttp's)


def test_a_reused_request_id_cannot_move_another_clients_events(tmp_path) -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        chat = orjson.loads(BODY.replace(b"plain-header", b"healthy"))
        alice_headers = {"x-user-id": "alice", "x-request-id": "alice-1"}
        async with s.post(gw.url + "/v1/chat/completions", json=chat, headers=alice_headers) as r:
            await r.read()
            alice_id = r.headers["x-request-id"]
        assert gw.gateway.recent.get("alice-1") == gw.gateway.recent.get(alice_id)  # her own id joins
        # mallory reuses alice's own id: it joins nothing from now on, never mallory's arm
        mallory = {"x-user-id": "mallory", "x-request-id": "alice-1"}
        async with s.post(gw.url + "/v1/chat/completions", json=chat, headers=mallory) as r:
            await r.read()
        assert gw.gateway.recent.get("alice-1") is None
        # mallory sends alice's id as her own: the gateway mints another for her request
        headers = {"x-user-id": "mallory", "x-request-id": alice_id}
        async with s.post(gw.url + "/v1/chat/completions", json=chat, headers=headers) as r:
            await r.read()
            assert r.headers["x-request-id"] != alice_id
        assert gw.gateway.recent.get(alice_id) is not None
        assert gw.gateway.recent.get(alice_id)[2] == next(  # type: ignore[index]
            rec.labels["user"] for rec in records if rec.request_id == alice_id
        )

    records = run_bounds(tmp_path, body)
    ids = [r.request_id for r in records]
    assert len(set(ids)) == len(ids) == 3
    assert records[2].labels["client_request_id"] == records[0].request_id


PASSWORD = "pw-0123456789-hunter2"
GW_KEY = "gw-client-key-0123456789"


@pytest.mark.timing
def test_known_secrets_are_scrubbed_by_value_and_the_gateway_key_never_leaves(tmp_path, monkeypatch) -> None:
    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        async def echo() -> bytes:
            chat = orjson.loads(BODY.replace(b"plain-header", b"echo-auth"))
            headers = {"Authorization": f"Bearer {GW_KEY}"}
            async with s.post(gw.url + "/v1/chat/completions", json=chat, headers=headers) as r:
                return await r.read()

        got, healthy = await beside(s, gw.url, gw.admin_url, echo())
        assert_healthy_beside(healthy, direct)
        assert PASSWORD.encode() in got  # the client gets the upstream's bytes; what is kept is scrubbed

    async def with_upstream() -> tuple[list[RequestRecord], list[bytes]]:
        async with HostileUpstream() as up:
            url = up.url.replace("http://", f"http://svc:{PASSWORD}@")
            records_path = tmp_path / "records.jsonl"
            config = GatewayConfig(
                upstreams=(parse_upstream(f"up={url}"),),
                port=0,
                records_path=str(records_path),
                client_keys=frozenset({GW_KEY}),
            )
            records: list[RequestRecord] = []
            async with aiohttp.ClientSession() as s, RunningGateway(config, on_record=records.append) as gw:
                auth = {"Authorization": f"Bearer {GW_KEY}"}
                # the healthy lanes of the harness send AUTH; this gateway wants its own key
                monkeypatch.setattr("gateway.bounds_harness.AUTH", auth)
                await body(gw, s, records, 1.0)
            return records, up.seen_heads

    records, heads = asyncio.run(asyncio.wait_for(with_upstream(), 60))
    echo = next(r for r in records if r.labels["model"] == "echo-auth")
    assert echo.labels["outcome"] == "upstream_abort_mid_stream" and echo.error
    assert PASSWORD not in echo.error and "***" in echo.error
    assert PASSWORD.encode() not in (tmp_path / "records.jsonl").read_bytes()
    basic = "Basic " + base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
    for head in heads:  # the upstream got its own credentials, never the gateway's client key
        assert GW_KEY.encode() not in head
        assert f"Authorization: {basic}".encode() in head


def test_an_upstream_key_from_the_environment_or_a_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("UP_KEY", "sk-env-0123456789")
    assert parse_upstream("a=http://h/v1,key_env=UP_KEY").auth == "Bearer sk-env-0123456789"
    key_file = tmp_path / "key"
    key_file.write_text("# upstream a\nsk-file-0123456789\n")
    assert parse_upstream(f"a=http://h/v1,key_file={key_file}").auth == "Bearer sk-file-0123456789"
    for bad, says in (
        ("a=http://h/v1,key_env=NOPE_UNSET", "NOPE_UNSET is not set"),
        (f"a=http://u:p@h/v1,key_file={key_file}", "give one"),
        (f"a=http://h/v1,key_file={tmp_path / 'none'}", "cannot read"),
    ):
        with pytest.raises(ValueError, match=says) as exc:
            parse_upstream(bad)
        assert "sk-" not in str(exc.value)
    config = GatewayConfig(upstreams=(parse_upstream("a=http://svc:hunter2-pw@h/v1"),), port=0)
    assert {"hunter2-pw", "svc:hunter2-pw"} <= set(config.secrets)


CLIENT_TOKEN = "client-own-token-0123456789"
CLIENT_KEY = "client-x-api-key-9876543210"
CLIENT_AZURE = "client-api-key-5555555555"


def test_a_clients_own_credentials_are_scrubbed_by_value_from_records_and_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 38, class 4: an upstream echoing the client's own bearer token without its scheme, and
    its x-api-key / api-key values, put them in the records file and the store (which stores the
    same scrubbed record the sink writes to the file)."""

    async def body(gw: RunningGateway, s: aiohttp.ClientSession, records: list[RequestRecord], direct: float):
        chat = orjson.loads(BODY.replace(b"plain-header", b"echo-keys"))
        headers = {
            "Authorization": f"Bearer {CLIENT_TOKEN}",
            "x-api-key": CLIENT_KEY,
            "api-key": CLIENT_AZURE,
        }
        async with s.post(gw.url + "/v1/chat/completions", json=chat, headers=headers) as r:
            got = await r.read()
        assert CLIENT_TOKEN.encode() in got  # the client gets the upstream's bytes; what is kept is scrubbed

    records = run_bounds(tmp_path, body)
    echo = next(r for r in records if r.labels["model"] == "echo-keys")
    assert echo.error and "bad keys" in echo.error
    for secret in (CLIENT_TOKEN, CLIENT_KEY, CLIENT_AZURE):
        assert secret not in echo.error
        assert secret.encode() not in (tmp_path / "records.jsonl").read_bytes()
