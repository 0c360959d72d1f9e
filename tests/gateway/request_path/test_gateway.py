"""The gateway proxies byte-exactly and records who broke each stream (upstreams on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web

from tokenpace.core.metrics import itl_gaps_ns, ttft_ns
from tokenpace.core.record import RequestRecord, Status
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.sink import Item
from tokenpace.testing.scripted_server import Script, ScriptedServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "secret prompt words"}], "max_tokens": 4}
# A stream with awkward framing: CRLF line ends, a comment, an event split across writes, usage.
STREAM_PIECES = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\r\n\r\n',
    b": keep-alive\n\n",
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel',
    b'lo"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":" wor"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"ld"},"finish_reason":"stop"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}\n\n',
    b"data: [DONE]\n\n",
]
FULL_BODY = (
    b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}'
)


class FixedUpstream:
    """Answers with fixed bytes (so direct and proxied bytes can be compared) and remembers headers."""

    def __init__(self) -> None:
        self.seen_headers: list[dict[str, str]] = []
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen_headers.append(dict(request.headers))
        body = await request.json() if request.can_read_body else {}
        if request.path == "/v1/models":
            return web.Response(
                body=b'{"object":"list","data":[{"id":"m"}]}', content_type="application/json"
            )
        if request.path == "/other":
            return web.Response(status=418, body=b"teapot", headers={"X-Custom": "1"})
        if not body.get("stream"):
            return web.Response(body=FULL_BODY, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Up": "yes"})
        await resp.prepare(request)
        for piece in STREAM_PIECES:
            await resp.write(piece)
            await asyncio.sleep(0.005)
        await resp.write_eof()
        return resp

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FixedUpstream:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))  # type: ignore[arg-type]


async def with_gateway(
    url: str, body: Callable[[RunningGateway, list[RequestRecord]], Awaitable[None]], **cfg: object
) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    config = GatewayConfig(upstreams=(parse_upstream(f"up={url},version=v1"),), port=0, **cfg)  # type: ignore[arg-type]
    async with RunningGateway(config, on_record=records.append) as gw:
        await body(gw, records)
    return records


def test_streaming_bytes_are_exact_and_measured() -> None:
    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        url = gw.url + "/v1/chat/completions"
        async with (
            aiohttp.ClientSession(auto_decompress=False) as s,
            s.post(url, json={**CHAT, "stream": True}) as r,
        ):
            assert r.status == 200
            assert r.headers["X-Up"] == "yes"
            got = await r.read()
        assert got == b"".join(STREAM_PIECES)

    async def main() -> None:
        async with FixedUpstream() as up:
            records = await with_gateway(up.url, body)
        (rec,) = records
        assert rec.status is Status.OK and rec.labels["outcome"] == "ok"
        assert rec.labels == {
            "model": "m",
            "upstream": "up",
            "arm": "up",
            "api": "chat",
            "config_epoch": "0",
            "version": "v1",
            "outcome": "ok",
        }
        assert rec.output_tokens_counted == 3  # three token-carrying chunks; role-only does not count
        assert rec.output_tokens == 7 and rec.prompt_tokens == 3  # usage from the stream wins
        assert rec.finish_reason == "stop"
        assert ttft_ns(rec) is not None and ttft_ns(rec) > 0  # type: ignore[operator]
        assert len(itl_gaps_ns(rec)) == 2
        assert rec.end_ns is not None and rec.end_ns >= rec.token_ns[-1]

    run(main())


def test_non_streaming_and_other_paths_pass_through_exactly() -> None:
    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            async with s.post(gw.url + "/v1/chat/completions", json=CHAT) as r:
                assert r.status == 200 and await r.read() == FULL_BODY
            async with s.get(gw.url + "/v1/models") as r:
                assert await r.read() == b'{"object":"list","data":[{"id":"m"}]}'
            async with s.get(gw.url + "/other") as r:
                assert r.status == 418 and r.headers["X-Custom"] == "1" and await r.read() == b"teapot"

    async def main() -> None:
        async with FixedUpstream() as up:
            records = await with_gateway(up.url, body)
        (rec,) = records  # only the generation request makes a record
        assert rec.status is Status.OK and rec.output_tokens == 2
        assert rec.first_token_ns == rec.token_ns[0]  # non-streamed: TTFT is when the body arrived

    run(main())


def test_credentials_forwarded_but_never_recorded(tmp_path) -> None:
    path = tmp_path / "records.jsonl"

    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with aiohttp.ClientSession() as s:
            headers = {"Authorization": "Bearer sk-SECRET", "x-user-id": "alice"}
            async with s.post(
                gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
            ) as r:
                await r.read()

    async def main() -> None:
        async with FixedUpstream() as up:
            await with_gateway(up.url, body, records_path=str(path))
            assert up.seen_headers[0]["Authorization"] == "Bearer sk-SECRET"

    run(main())
    text = path.read_text()
    assert json.loads(text.splitlines()[0])["labels"]["outcome"] == "ok"
    for secret in ("sk-SECRET", "alice", "secret prompt", "Hello", '"ld"'):  # "ld": a streamed piece
        assert secret not in text


@pytest.mark.parametrize(
    ("script", "outcome", "status", "client_breaks"),
    [
        (Script(http_status=500), "http_error", Status.HTTP_ERROR, False),
        (
            Script(ttft_s=0.01, itl_s=0.002, cut_after=3),
            "upstream_abort_mid_stream",
            Status.STREAM_INTERRUPTED,
            True,
        ),
        (
            Script(ttft_s=0.01, itl_s=0.002, error_event_after=2),
            "upstream_abort_mid_stream",
            Status.STREAM_INTERRUPTED,
            False,
        ),
        (Script(ttft_s=0.01, itl_s=0.002, stall_after=2), "stall", Status.TIMEOUT, True),
        (Script(ttft_s=5.0), "timeout_before_first_token", Status.TIMEOUT, True),
    ],
)
def test_outcomes_say_who_broke_the_stream(
    script: Script, outcome: str, status: Status, client_breaks: bool
) -> None:
    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with aiohttp.ClientSession() as s:
            try:
                async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                    await r.read()
                broke = False
            except aiohttp.ClientPayloadError:
                broke = True
        if script.malformed_after is None:
            assert broke == client_breaks
        while not records:
            await asyncio.sleep(0.01)

    async def main() -> None:
        async with ScriptedServer(script) as up:
            records = await with_gateway(up.url, body, first_token_timeout_s=0.3, stall_timeout_s=0.3)
        (rec,) = records
        assert rec.labels["outcome"] == outcome and rec.status is status
        assert rec.end_ns is not None and rec.error

    run(main())


def test_client_disconnect_cancels_upstream() -> None:
    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with (
            aiohttp.ClientSession() as s,
            s.post(gw.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 1000, "stream": True}) as r,
        ):
            await r.content.readline()  # the stream is flowing; now walk away
            r.close()
        while not records:
            await asyncio.sleep(0.01)

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.01, itl_s=0.01)) as up:
            records = await with_gateway(up.url, body)
            for _ in range(100):  # the gateway closed its upstream connection
                if not up.connections:
                    break
                await asyncio.sleep(0.01)
            assert not up.connections
        (rec,) = records
        assert rec.labels["outcome"] == "client_disconnect" and rec.status is Status.CANCELLED

    run(main())


def test_bad_requests_and_dead_upstreams_do_not_disturb_others() -> None:
    async def main() -> None:
        records: list[RequestRecord] = []
        async with ScriptedServer(Script(ttft_s=0.05, itl_s=0.005)) as up:
            config = GatewayConfig(
                upstreams=(
                    parse_upstream(f"good={up.url},model=m"),
                    parse_upstream("dead=http://127.0.0.1:9/v1,model=dead"),
                ),
                port=0,
                max_body_bytes=10_000,
            )
            async with RunningGateway(config, on_record=records.append) as gw, aiohttp.ClientSession() as s:
                url = gw.url + "/v1/chat/completions"

                async def good() -> bytes:
                    async with s.post(url, json={**CHAT, "stream": True}) as r:
                        return await r.read()

                async def bad_json() -> tuple[int, dict]:
                    async with s.post(
                        url, data=b"{not json", headers={"Content-Type": "application/json"}
                    ) as r:
                        return r.status, await r.json()

                async def dead() -> tuple[int, dict]:
                    async with s.post(url, json={**CHAT, "model": "dead"}) as r:
                        return r.status, await r.json()

                async def huge() -> int:
                    async with s.post(url, data=b"x" * 20_000) as r:
                        return r.status

                ok1, (s400, e400), (s502, e502), s413, ok2 = await asyncio.gather(
                    good(), bad_json(), dead(), huge(), good()
                )
        assert ok1.endswith(b"data: [DONE]\n\n") and ok2.endswith(b"data: [DONE]\n\n")
        assert s400 == 400 and e400["error"]["type"] == "invalid_request_error"
        assert (
            s502 == 502 and "dead" in e502["error"]["message"] and "127.0.0.1" not in e502["error"]["message"]
        )
        assert s413 == 413
        outcomes = sorted(r.labels["outcome"] for r in records)
        assert outcomes == ["connect_error", "ok", "ok"]

    run(main())


def test_records_dropped_and_counted_when_writer_is_slow() -> None:
    import threading

    gate = threading.Event()
    written: list[int] = []

    def slow_writer(batch: list[Item]) -> None:
        gate.wait(5)
        written.append(len(batch))

    async def main() -> None:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0, record_queue=2)
            gw = RunningGateway(config, writer=slow_writer)
            async with gw, aiohttp.ClientSession() as s:
                gw.gateway.sink.linger_s = 0  # the writer takes each record at once (no batching wait)
                for _ in range(6):
                    async with s.post(gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                        assert r.status == 200
                        await r.read()
                async with s.get(gw.url + "/metrics") as r:
                    text = await r.text()
                gate.set()
            # one record was taken by the writer, two waited in the queue, three were dropped
            assert gw.gateway.sink.dropped == 3
            assert "tokenpace_gateway_records_dropped_total 3.0" in text
            assert sum(written) == 3

    run(main())


def test_record_keeps_the_clients_request_id_apart_from_the_gateways() -> None:
    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with aiohttp.ClientSession() as s:
            for rid in ("job-42", None):
                headers = {"x-request-id": rid} if rid else {}
                async with s.post(
                    gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
                ) as r:
                    await r.read()

    async def main() -> None:
        async with FixedUpstream() as up:
            records = await with_gateway(up.url, body)
        # the gateway always mints the id events join on; the client's own is kept beside it
        assert all(len(r.request_id) == 32 and r.request_id != "job-42" for r in records)
        assert [r.labels.get("client_request_id") for r in records] == ["job-42", None]

    run(main())


def test_records_keep_the_prompt_s_shape_and_its_text_only_when_asked(tmp_path) -> None:
    long_chat = {**CHAT, "messages": [{"role": "user", "content": "shared words " * 400}]}

    async def body(gw: RunningGateway, records: list[RequestRecord]) -> None:
        async with (
            aiohttp.ClientSession() as s,
            s.post(gw.url + "/v1/chat/completions", json=long_chat) as r,
        ):
            await r.read()

    async def main() -> tuple[list[RequestRecord], list[RequestRecord]]:
        async with FixedUpstream() as up:
            plain = await with_gateway(up.url, body, records_path=str(tmp_path / "plain.jsonl"))
            kept = await with_gateway(up.url, body, keep_prompts=True)
        return plain, kept

    plain, kept = asyncio.run(asyncio.wait_for(main(), 30))
    assert plain[0].prompt_chars == len("shared words " * 400)
    assert len(plain[0].prefix_hashes or []) == 2 and plain[0].prompt_text is None
    assert "shared words" not in (tmp_path / "plain.jsonl").read_text()
    assert kept[0].prefix_hashes == plain[0].prefix_hashes
    assert kept[0].prompt_text == "shared words " * 400
