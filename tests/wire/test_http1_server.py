"""The shared HTTP/1.1 server half, driven over a real socket with hand-written bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tokenpace.wire.http1.server import HttpRequest, ServerConnection

Handler = Callable[[HttpRequest], None]


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


async def _serve(handler: Handler, talk: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable]):
    loop = asyncio.get_running_loop()
    conns: set[ServerConnection] = set()
    server = await loop.create_server(
        lambda: ServerConnection(handler, conns.add, conns.discard), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await talk(reader, writer)
    finally:
        writer.close()
        server.close()
        for c in list(conns):
            c.abort()
        await server.wait_closed()


def echo(req: HttpRequest) -> None:
    body = f"{req.method} {req.path} {req.headers.get('x-n', '-')} {req.body.decode()}".encode()
    req.conn.respond(200, body, [("content-type", "text/plain")])


def test_request_split_into_single_bytes_is_parsed_whole() -> None:
    raw = b"POST /v1/x?q=1 HTTP/1.1\r\nHost: h\r\nX-N: 7\r\nContent-Length: 5\r\n\r\nhello"

    async def talk(reader, writer):
        for i in range(len(raw)):
            writer.write(raw[i : i + 1])
            await writer.drain()
        return await reader.readuntil(b"hello")

    got = run(_serve(echo, talk))
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length: 18\r\n" in got
    assert got.endswith(b"\r\n\r\nPOST /v1/x 7 hello")


def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    pending: list[HttpRequest] = []

    def slow(req: HttpRequest) -> None:
        pending.append(req)  # answered later, from the test

    async def talk(reader, writer):
        writer.write(
            b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
            b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
            b"GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
        await writer.drain()
        seen = []
        for _ in range(3):
            while not pending:
                await asyncio.sleep(0.001)
            assert len(pending) == 1  # the next one waits until this one is answered
            req = pending.pop()
            seen.append(req.path)
            req.conn.start_stream(200, [])
            req.conn.write_chunk(req.path.encode())
            req.conn.end_stream(b"!")
        seen.append(await reader.read())  # the server closes after the `Connection: close` one
        return seen

    a, b, c, wire = run(_serve(slow, talk))
    assert (a, b, c) == ("/a", "/b", "/c")
    bodies = wire.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert [x.split(b"\r\n\r\n", 1)[1] for x in bodies] == [
        b"2\r\n/a\r\n1\r\n!\r\n0\r\n\r\n",
        b"2\r\n/b\r\n1\r\n!\r\n0\r\n\r\n",
        b"2\r\n/c\r\n1\r\n!\r\n0\r\n\r\n",
    ]
    assert b"transfer-encoding: chunked" in bodies[0]
    assert b"connection: close" in bodies[2] and b"connection: close" not in bodies[0]


def test_expect_100_continue_is_answered_before_the_body_is_sent() -> None:
    async def talk(reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        await writer.drain()
        interim = await reader.readuntil(b"\r\n\r\n")
        writer.write(b"abc")
        await writer.drain()
        return interim, await reader.readuntil(b"abc")

    interim, final = run(_serve(echo, talk))
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final.startswith(b"HTTP/1.1 200 OK") and final.endswith(b"POST /up - abc")


def test_chunked_request_body_is_joined() -> None:
    async def talk(reader, writer):
        writer.write(
            b"PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        )
        await writer.drain()
        return await reader.readuntil(b"abcde")

    assert run(_serve(echo, talk)).endswith(b"PUT /c - abcde")


def test_malformed_request_gets_400_and_close() -> None:
    async def talk(reader, writer):
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        return await reader.read()

    got = run(_serve(echo, talk))
    assert got.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"connection: close" in got and got.endswith(b"malformed HTTP request")


def test_on_lost_is_called_when_the_client_leaves_mid_answer() -> None:
    lost = asyncio.Event()

    def hang(req: HttpRequest) -> None:
        req.conn.start_stream(200, [])
        req.conn.on_lost = lost.set

    async def talk(reader, writer):
        writer.write(b"GET /s HTTP/1.1\r\nHost: h\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await lost.wait()
        return True

    assert run(_serve(hang, talk)) is True


def test_a_body_over_the_limit_gets_413_at_once_not_100_continue() -> None:
    seen: list[HttpRequest] = []
    head = b"POST /v1/x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"

    async def talk(reader, writer):
        writer.write(head % (64 * 1024 * 1024))  # the body is never sent: the answer must not wait
        return await reader.read(65536)

    got = run(_serve(seen.append, talk))
    assert got.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in got
    assert not seen  # the handler never saw it

    async def chunked(reader, writer):  # no length said: refused once the body passes the limit
        writer.write(b"POST /v1/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(20):
            writer.write(b"100000\r\n" + b"x" * 0x100000 + b"\r\n")
        return await reader.read(65536)

    got = run(_serve(seen.append, chunked))
    assert got.startswith(b"HTTP/1.1 413 ") and not seen
