"""Addresses for new connections: IP literals need no lookup; a burst of connections shares one."""

from __future__ import annotations

import asyncio
import socket

from tokenpace.wire.dial import Resolver


def test_ip_literals_are_used_as_they_are():
    async def go():
        resolver = Resolver()
        return await resolver.resolve("127.0.0.1", 8000), await resolver.resolve("::1", 8000)

    v4, v6 = asyncio.run(go())
    assert v4 == [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 8000))]
    assert v6[0][0] == socket.AF_INET6 and v6[0][4][:2] == ("::1", 8000)


def test_a_burst_of_connections_shares_one_lookup_and_a_later_one_looks_again():
    calls = []

    async def go():
        loop = asyncio.get_running_loop()
        real = loop.getaddrinfo

        async def counting(*args, **kwargs):
            calls.append(args[0])
            await asyncio.sleep(0.01)  # a lookup in flight while the others ask
            return await real(*args, **kwargs)

        loop.getaddrinfo = counting  # type: ignore[method-assign]
        resolver = Resolver()
        burst = await asyncio.gather(*(resolver.resolve("localhost", 8000) for _ in range(50)))
        later = await resolver.resolve("localhost", 8000)
        return burst, later

    burst, later = asyncio.run(go())
    assert calls == ["localhost", "localhost"]  # one for the burst of 50, one for the later connection
    assert all(b == burst[0] for b in burst) and later == burst[0]


def test_a_dialled_connection_sends_each_chunk_at_once_on_either_loop() -> None:
    """TCP_NODELAY (no Nagle delay on a small request or chunk): set by the loop's own transport."""
    import uvloop

    from tokenpace.wire.dial import dial

    async def go() -> int:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        conn, _ = await dial("127.0.0.1", server.sockets[0].getsockname()[1], None)
        assert conn.transport is not None
        flag = conn.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        conn.close()
        server.close()
        return flag

    assert asyncio.run(go()) and uvloop.run(go())
