"""Each fault is served as configured, by header and by rate; the server survives them all."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from tokenpace.sim import FaultConfig, SimServer

CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "stream": True}


def serve(coro_fn, **kw):
    async def main():
        async with SimServer(**kw) as srv, aiohttp.ClientSession() as session:
            return await coro_fn(srv, session)

    return asyncio.run(main())


async def read_stream(resp):
    """(data payloads as text, saw [DONE], stream ended cleanly)."""
    payloads, done = [], False
    try:
        async for line in resp.content:
            line = line.decode().strip()
            if line.startswith("data: "):
                if line == "data: [DONE]":
                    done = True
                else:
                    payloads.append(line[6:])
    except aiohttp.ClientPayloadError:
        return payloads, done, False
    return payloads, done, True


def test_error_code_and_429_with_retry_after_by_header():
    async def go(srv, s):
        out = []
        for h in ("503", "500", "429"):
            async with s.post(srv.url + "/chat/completions", json=CHAT, headers={"x-sim-fault": h}) as r:
                out.append((r.status, r.headers.get("retry-after"), await r.json()))
        return out

    (s503, _, e503), (s500, _, _), (s429, retry, e429) = serve(go, faults=FaultConfig(retry_after_s=2))
    assert (s503, s500, s429) == (503, 500, 429)
    assert retry == "2"
    assert (
        set(e503["error"]) == {"message", "type", "param", "code"}
        and e429["error"]["type"] == "rate_limit_error"
    )


def test_hang_sends_headers_then_nothing():
    async def go(srv, s):
        t0 = time.perf_counter()
        async with s.post(srv.url + "/chat/completions", json=CHAT, headers={"x-sim-fault": "hang"}) as r:
            status = r.status
            first = await r.content.readline()  # the role chunk comes before any engine work
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(r.content.readline(), 0.2)  # blank separator line
                await asyncio.wait_for(r.content.readline(), 0.4)
        return status, first, time.perf_counter() - t0

    status, first, elapsed = serve(go)
    assert status == 200 and b'"role":"assistant"' in first and elapsed >= 0.4


def test_cut_stream_ends_without_done_after_the_given_tokens():
    async def go(srv, s):
        async with s.post(srv.url + "/chat/completions", json=CHAT, headers={"x-sim-fault": "cut:3"}) as r:
            cut = await read_stream(r)
        async with s.post(srv.url + "/chat/completions", json=CHAT) as r:  # the server is fine afterwards
            ok = await read_stream(r)
        return cut, ok

    (payloads, done, clean), (ok_payloads, ok_done, _) = serve(go)
    assert not done and not clean
    tokens = [p for p in payloads if '"content":" ' in p]
    assert len(tokens) == 3
    assert ok_done and len([p for p in ok_payloads if '"content":" ' in p]) == 8


def test_malformed_chunk_in_the_middle_then_the_stream_goes_on():
    async def go(srv, s):
        async with s.post(
            srv.url + "/chat/completions", json=CHAT, headers={"x-sim-fault": "malformed:4"}
        ) as r:
            return await read_stream(r)

    payloads, done, clean = serve(go)
    bad = []
    for i, p in enumerate(payloads):
        try:
            json.loads(p)
        except ValueError:
            bad.append(i)
    assert len(bad) == 1 and done and clean
    assert bad[0] == 4  # role chunk, 3 tokens, then the broken one before the 4th token
    assert len([p for p in payloads if '"content":" ' in p]) == 8


def test_error_rate_serves_about_the_configured_share_with_the_chosen_codes():
    faults = FaultConfig(error_rate=0.3, error_codes=(500, 503), rate_limit_rate=0.1, seed=7)

    async def go(srv, s):
        async def one():
            async with s.post(srv.url + "/completions", json={"prompt": "x", "max_tokens": 1}) as r:
                await r.read()
                return r.status

        return await asyncio.gather(*(one() for _ in range(300)))

    codes = serve(go, faults=faults)
    n = len(codes)
    errors = [c for c in codes if c in (500, 503)]
    assert set(codes) <= {200, 429, 500, 503} and {500, 503} <= set(codes)
    assert 0.22 * n < len(errors) < 0.38 * n
    assert 0.05 * n < codes.count(429) < 0.16 * n


def test_cold_start_makes_the_first_seconds_slow():
    async def go(srv, s):
        body = {"prompt": "a " * 2000, "max_tokens": 2}

        async def ttft():
            t0 = time.perf_counter()
            async with s.post(srv.url + "/completions", json={**body, "stream": True}) as r:
                async for line in r.content:
                    if b'"text":" ' in line:
                        return time.perf_counter() - t0
            raise AssertionError("no token")

        cold = await ttft()
        await asyncio.sleep(max(0.0, 0.5 - (time.perf_counter() - t_start)))
        return cold, await ttft()

    t_start = time.perf_counter()
    cold, warm = serve(go, faults=FaultConfig(cold_start_s=0.4, cold_start_factor=5))
    assert cold > 3 * warm, (cold, warm)


def test_fault_config_validation_and_file(tmp_path):
    with pytest.raises(ValueError):
        FaultConfig(error_rate=0.7, hang_rate=0.5)
    with pytest.raises(ValueError):
        FaultConfig(error_codes=(42,))
    f = tmp_path / "faults.json"
    f.write_text('{"error_rate": 0.1, "error_codes": [502]}')
    assert FaultConfig.from_file(f).error_codes == (502,)
    f.write_text('{"eror_rate": 0.1}')
    with pytest.raises(ValueError, match="eror_rate"):
        FaultConfig.from_file(f)


def test_non_streaming_cut_drops_the_connection_and_malformed_truncates_the_body():
    body = {"prompt": "x", "max_tokens": 6}

    async def go(srv, s):
        out = []
        for h in ("cut:2", "malformed"):
            try:
                async with s.post(srv.url + "/completions", json=body, headers={"x-sim-fault": h}) as r:
                    out.append((r.status, await r.read()))
            except aiohttp.ClientError as e:
                out.append(("dropped", type(e).__name__))
        return out

    (cut, malformed) = serve(go)
    assert cut[0] == "dropped"
    assert malformed[0] == 200
    with pytest.raises(ValueError):
        json.loads(malformed[1])
