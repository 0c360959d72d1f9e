"""Network phases: cold connections apart from warm ones, TLS timed, set-up cost on purpose."""

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Coroutine
from typing import Any

import pytest
from bench_factory import bench_config

from tokenpace.app.bench.bench import BenchResult, BenchRun
from tokenpace.app.watch.preflight import PreflightError
from tokenpace.core.network import network_phases
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.workload.lengths import parse_length
from tokenpace.sim import SimServer
from tokenpace.testing.scripted_server import Script, ScriptedServer

MS = 1_000_000
FAST = Script(ttft_s=0.005, itl_s=0.001)


def test_phases_of_hand_made_records():
    cold = RequestRecord(
        "c",
        sent_ns=1000 * MS,
        connect_ns=30 * MS,
        dns_ns=5 * MS,
        tcp_ns=10 * MS,
        tls_ns=15 * MS,
        request_ns=1031 * MS,
        headers_ns=1100 * MS,
        first_token_ns=1120 * MS,
    )
    warm = RequestRecord(
        "w", sent_ns=2000 * MS, request_ns=2000 * MS + 500_000, headers_ns=2050 * MS, first_token_ns=2060 * MS
    )
    failed = RequestRecord("f", sent_ns=3000 * MS, status=Status.CONNECT_ERROR)
    net = network_phases([cold, warm, failed])
    assert net["new_connections"] == 1 and net["reused_connections"] == 2
    assert (net["dns_ms"]["p50"], net["tcp_ms"]["p50"], net["tls_ms"]["p50"]) == (5, 10, 15)
    assert net["upload_ms"]["n"] == 2 and net["upload_ms"]["max"] == 1
    assert net["wait_headers_ms"]["p50"] == pytest.approx((69 + 49.5) / 2)
    assert net["ttft_cold_ms"]["p50"] == 120 and net["ttft_warm_ms"]["p50"] == 60


def bench(url: str, **kw: Any) -> Coroutine[Any, Any, BenchResult]:
    defaults = {"input_len": "8", "output_len": "4", "concurrency": 2, "requests": 8, "timeout_s": 5.0,
                "server_metrics": "off"}  # fmt: skip
    return BenchRun(bench_config(url, **{**defaults, **kw})).run()


def test_new_connection_per_request_times_every_set_up():
    async def go():
        async with ScriptedServer(FAST) as srv:
            return await bench(srv.url, new_connection_per_request=True)

    result = asyncio.run(go())
    assert all(r.connect_ns is not None and r.tcp_ns is not None for r in result.records)
    assert result.summary.extra["network"]["new_connections"] == 8
    assert result.conditions["connections"]["reuse"] is False


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: cannot make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return d / "cert.pem", d / "key.pem"


def test_tls_handshake_is_timed_and_verification_is_real(certificate):
    cert, key = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def go(**kw):
        async with ScriptedServer(FAST, ssl_context=server_ctx) as srv:
            return await bench(srv.url, **kw)

    trusted = asyncio.run(go(ca_cert=str(cert)))
    assert trusted.summary.counts["ok"] == 8
    cold = [r for r in trusted.records if r.connect_ns is not None]
    assert cold and all(r.tls_ns is not None and r.tls_ns > 0 for r in cold)
    assert trusted.summary.extra["network"]["tls_ms"]["n"] == len(cold)

    with pytest.raises(PreflightError, match="certificate verify failed"):
        asyncio.run(go())  # self-signed and not trusted: refused before any load, with the reason

    insecure = asyncio.run(go(tls_verify=False))
    assert insecure.summary.counts["ok"] == 8


def test_server_metrics_of_the_simulator_and_the_ttft_decomposition(tmp_path):
    async def go():
        async with SimServer(port=0) as srv:
            return await bench(
                srv.url,
                input_len=parse_length("512"),
                output_len=parse_length("16"),
                concurrency=4,
                requests=24,
                server_metrics="auto",
                server_metrics_interval_s=0.1,
                connect_probe=True,
            )

    result = asyncio.run(go())
    d = result.to_dict()
    sm = d["server_metrics"]
    assert sm["engine"] == "vllm" and sm["source"] == "auto" and sm["scrapes"] >= 3
    assert max(v for _, v in sm["series"]["running"]) >= 1
    dec = sm["decomposition"]
    assert dec["requests"] >= 20
    # the engine's TTFT is part of what the client saw: the rest is network and client
    assert 0 < dec["engine_ttft_mean_ms"] <= dec["client_ttft_mean_ms"] + 1
    assert dec["network_and_client_ms"] < 0.5 * dec["client_ttft_mean_ms"]
    assert sm["counters"]["prompt_tokens"] > 24 * 500
    assert d["summary"]["server"]["engine"] == "vllm"
    assert d["connect_probe"]["probes"] >= 1 and d["connect_probe"]["failures"] == 0


def test_auto_server_metrics_is_quietly_off_where_there_are_none():
    async def go():
        async with ScriptedServer(FAST) as srv:
            return await bench(srv.url, server_metrics="auto")

    result = asyncio.run(go())
    assert "server_metrics" not in result.to_dict()
    assert result.conditions["observers"]["server_metrics_source"].startswith("auto: none")
