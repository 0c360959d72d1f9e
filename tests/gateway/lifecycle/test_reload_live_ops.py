"""Live operations with a running gateway: a mirror added by a reload gets its shadow records
stored (in the new epoch's run), a refused reload lists every problem (the same lines as
``--check-config``), a reloaded SLO redraws /metrics's buckets so that every bucket the emitted
rules name is exported."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tokenpace.adapters.store import connect
from tokenpace.core.metrics import Slo
from tokenpace.core.record import RequestRecord
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.experiments.mirror import parse_mirror
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.observability.emit import emit
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.scripted_server import Script, ScriptedServer

KEY = "admin-key-for-tests"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def _config(url: str, **kw: Any) -> GatewayConfig:
    return GatewayConfig(upstreams=(parse_upstream(f"a={url}"),), port=0, admin_keys=frozenset({KEY}), **kw)


async def _send(s: aiohttp.ClientSession, url: str, n: int, tag: str) -> None:
    async def one(i: int) -> None:
        headers = {"x-user-id": f"{tag}-{i}"}
        async with s.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": 2}, headers=headers) as r:
            assert r.status == 200
            await r.read()

    await asyncio.gather(*(one(i) for i in range(n)))


async def _reload(s: aiohttp.ClientSession, gw: RunningGateway) -> tuple[int, dict[str, Any]]:
    async with s.post(gw.admin_url + "/tokenpace/config", headers=AUTH) as r:
        return r.status, await r.json()


def test_a_mirror_added_live_gets_its_shadow_records_stored(tmp_path: Path) -> None:
    store = connect(str(tmp_path / "runs.db"))

    async def main() -> StoreRecordWriter:
        async with (
            ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as live,
            ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as shadow,
        ):
            start = _config(live.url)
            want = [start]
            writer = StoreRecordWriter(store, start, "sess")
            seen: list[RequestRecord] = []
            gw = RunningGateway(start, writer=writer, on_record=seen.append, load=lambda: want[0])
            async with gw, aiohttp.ClientSession() as s:
                await _send(s, gw.url, 3, "before")
                want[0] = dataclasses.replace(start, mirrors=(parse_mirror(f"cand={shadow.url}"),))
                assert (await _reload(s, gw))[0] == 200
                await _send(s, gw.url, 6, "mirrored")
                for _ in range(500):  # copies are sent and recorded in the background
                    if sum(1 for r in seen if r.labels.get("shadow")) >= 6:
                        break
                    await asyncio.sleep(0.02)
            return writer

    writer = asyncio.run(main())
    runs = {(r.labels["upstream"], r.labels["config_epoch"]): r for r in store.list_runs()}
    assert set(runs) == {("a", "0"), ("a", "1"), ("cand", "1")}
    shadow_run = runs[("cand", "1")]
    assert shadow_run.labels.get("shadow") == "true"
    assert len(store.load_records(shadow_run.id)) == 6
    assert writer.unplaced == 0
    store.close()


BUCKET = re.compile(r'(\w+)_bucket\{[^}]*?le="([^"]+)"')


def test_every_bucket_the_rules_of_a_reloaded_slo_name_is_exported(tmp_path: Path) -> None:
    new_slo = Slo(ttft_ms=450, tpot_ms=35, e2e_ms=7000)  # none of them a bound of the start's SLO
    emit(tmp_path, new_slo)
    doc = yaml.safe_load((tmp_path / "tokenpace-gateway-rules.yml").read_text())
    exprs = [rule["expr"] for group in doc["groups"] for rule in group["rules"]]
    named = {found for expr in exprs for found in BUCKET.findall(expr)}
    assert {le for _, le in named} >= {"0.45", "0.035", "7.0"}

    async def main() -> tuple[str, str]:
        async with ScriptedServer(Script(ttft_s=0.001, itl_s=0.001)) as up:
            start = _config(up.url, slo=Slo(ttft_ms=800))
            want = [dataclasses.replace(start, slo=new_slo)]
            async with RunningGateway(start, load=lambda: want[0]) as gw, aiohttp.ClientSession() as s:
                await _send(s, gw.url, 2, "before")
                async with s.get(gw.admin_url + "/metrics", headers=AUTH) as r:
                    before = await r.text()
                assert (await _reload(s, gw))[0] == 200
                await _send(s, gw.url, 2, "after")
                async with s.get(gw.admin_url + "/metrics", headers=AUTH) as r:
                    return before, await r.text()

    before, after = asyncio.run(main())
    assert not named <= set(BUCKET.findall(before))  # the start's buckets lack them
    exported = set(BUCKET.findall(after))
    assert named <= exported, sorted(named - exported)
