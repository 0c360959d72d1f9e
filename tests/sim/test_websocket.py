"""The sim's realtime WebSocket endpoint: handshake, session and response events, errors, framing."""

from __future__ import annotations

import asyncio
import os

import aiohttp

from tokenpace.sim import SimServer
from tokenpace.sim.websocket import TEXT, FrameReader, accept_key, frame


def ask(n=3, text="hi there", **extra):
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return {"type": "response.create", "response": {"max_output_tokens": n, "input": [item], **extra}}


def with_session(fn):
    async def main():
        async with (
            SimServer() as srv,
            aiohttp.ClientSession() as s,
            s.ws_connect(srv.url.replace("http", "ws") + "/realtime?model=m") as ws,
        ):
            first = await ws.receive_json()
            assert first["type"] == "session.created"
            return await fn(ws)

    return asyncio.run(main())


async def until_done(ws):
    events = []
    while not events or events[-1]["type"] not in ("response.done", "error"):
        events.append(await ws.receive_json())
    return events


def test_a_response_streams_text_deltas_then_done_with_usage():
    async def go(ws):
        await ws.send_json(ask(3, conversation="none"))
        return await until_done(ws)

    events = with_session(go)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.done",
    ]
    assert "".join(e["delta"] for e in events if "delta" in e) == " lorem ipsum dolor"
    done = events[-1]["response"]
    assert done["status"] == "incomplete" and done["usage"]["output_tokens"] == 3
    assert done["output"][0]["content"][0]["text"] == " lorem ipsum dolor"


def test_the_conversation_grows_unless_a_response_is_out_of_band():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one two three"}]}

    async def go(ws):
        await ws.send_json({"type": "conversation.item.create", "item": item})
        assert (await ws.receive_json())["type"] == "conversation.item.created"
        await ws.send_json({"type": "response.create", "response": {"max_output_tokens": 1}})
        in_conversation = (await until_done(ws))[-1]
        await ws.send_json(ask(1, text="x", conversation="none"))
        out_of_band = (await until_done(ws))[-1]
        return in_conversation, out_of_band

    a, b = with_session(go)
    assert a["response"]["usage"]["input_tokens"] == 4 + 3 + 3  # one message: overhead + words + reply
    assert b["response"]["usage"]["input_tokens"] == 4 + 1 + 3


def test_one_response_at_a_time_and_unknown_events_get_error_events():
    async def go(ws):
        await ws.send_json(ask(20))
        await ws.send_json(ask(1))
        await ws.send_json({"type": "no.such.event", "event_id": "e1"})
        errors, seen_done = [], False
        while len(errors) < 2 or not seen_done:
            ev = await ws.receive_json()
            errors += [ev["error"]] if ev["type"] == "error" else []
            seen_done = seen_done or ev["type"] == "response.done"
        return errors

    errors = with_session(go)
    assert [e["code"] for e in errors] == ["conversation_already_has_active_response", "unknown_event"]
    assert errors[1]["event_id"] == "e1"


def test_plain_get_is_told_to_upgrade_and_ping_gets_pong():
    async def main():
        async with SimServer() as srv, aiohttp.ClientSession() as s:
            async with s.get(srv.url + "/realtime") as r:
                status = r.status
            async with s.ws_connect(srv.url.replace("http", "ws") + "/realtime", autoping=False) as ws:
                await ws.receive_json()
                await ws.ping(b"hello")
                pong = await ws.receive()
            return status, pong

    status, pong = asyncio.run(main())
    assert status == 426
    assert pong.type is aiohttp.WSMsgType.PONG and pong.data == b"hello"


def test_frames_round_trip_masked_fragmented_and_long():
    key = os.urandom(4)
    payload = b"x" * 70_000

    def masked(data, opcode, fin=True):
        head = bytes((0x80 * fin | opcode, 0x80 | 127)) + len(data).to_bytes(8, "big") + key
        return head + bytes(b ^ key[i % 4] for i, b in enumerate(data))

    reader = FrameReader()
    wire = masked(payload[:10], TEXT, fin=False) + masked(payload[10:], 0)
    assert reader.feed(wire[:5]) == [] and reader.feed(wire[5:]) == [(TEXT, payload)]
    assert FrameReader().feed(frame(b"hi")) == [(TEXT, b"hi")]
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example
