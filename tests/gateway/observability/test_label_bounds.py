"""Label values bounded in size, not only in count (issue 49, item 3): model names come from the
request (and from an upstream's model list), and eight 250 KB names once made a 200 MB page."""

from __future__ import annotations

import asyncio
import threading

import aiohttp
import pytest

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability import prom
from tokenpace.gateway.observability.prom import (
    HASH_ON_LOOP_CHARS,
    MAX_LABEL_BYTES,
    ModelLabels,
    bounded_label,
)
from tokenpace.testing.scripted_server import Script, ScriptedServer


def test_a_long_value_keeps_its_head_and_a_hash_within_the_bound() -> None:
    assert bounded_label("llama-3.1-8b") == "llama-3.1-8b"
    exact = "é" * (MAX_LABEL_BYTES // 2)  # exactly the bound in bytes: kept whole
    assert bounded_label(exact) == exact
    a, b = bounded_label("m" * 250_000), bounded_label("m" * 249_999 + "n")
    assert a != b  # names that share their head stay apart
    assert a.startswith("m" * 100) and "~" in a
    for value in ("m" * 250_000, "é" * 1000, "模型" * 500, "x" * 127 + "😀"):
        assert len(bounded_label(value).encode()) <= MAX_LABEL_BYTES
        assert bounded_label(bounded_label(value)) == bounded_label(value)  # a bounded value is kept


def test_model_labels_bound_the_configured_and_listed_names_too() -> None:
    labels = ModelLabels({"c" * 10_000}, limit=2)
    labels.reserve(["l" * 10_000])
    assert labels("c" * 10_000) == bounded_label("c" * 10_000)  # still configured: no slot taken
    assert labels("l" * 10_000) == bounded_label("l" * 10_000)
    assert len(labels.seen) == 0
    assert all(len(v.encode()) <= MAX_LABEL_BYTES for v in labels.reserved)


def test_eight_huge_model_names_make_a_small_metrics_page() -> None:
    records: list[RequestRecord] = []

    async def main() -> str:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            config = GatewayConfig(upstreams=(parse_upstream(f"up={up.url}"),), port=0)
            async with (
                RunningGateway(config, on_record=records.append) as gw,
                aiohttp.ClientSession() as s,
            ):
                for i in range(8):
                    chat = {"model": f"{i}" + "m" * 250_000, "messages": [{"role": "user", "content": "hi"}]}
                    async with s.post(gw.url + "/v1/chat/completions", json=chat) as r:
                        await r.read()
                async with s.get(gw.admin_url + "/metrics") as r:
                    return await r.text()

    page = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(page) < 512 * 1024  # was ~200 MB: 8 names x 250 KB x every series
    assert max(len(line) for line in page.splitlines()) < 1024
    models = {r.labels["model"] for r in records}
    assert len(models) == 8 and all(len(m.encode()) <= MAX_LABEL_BYTES for m in models)


def test_a_body_sized_name_is_bounded_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []

    def spy(value: str) -> str:
        threads.append(threading.get_ident())
        return bounded_label(value)

    monkeypatch.setattr(prom, "bounded_label", spy)
    long = "m" * (HASH_ON_LOOP_CHARS + 1)
    got = asyncio.run(prom.model_label(long))
    assert got == bounded_label(long) and threads and threading.get_ident() not in threads
    threads.clear()
    short = "m" * HASH_ON_LOOP_CHARS  # kept as it is: ModelLabels bounds it on the loop (cheap)
    assert asyncio.run(prom.model_label(short)) == short and asyncio.run(prom.model_label(None)) is None
    assert not threads
