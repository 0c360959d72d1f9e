"""`tokenpace sweep` against llama-server with 2 slots: saturation at the slot count.

On a 2-core machine the second slot does not add throughput (the client and the server's HTTP
threads share the cores with the single compute thread, and ggml's CPU kernels do not make a batch
of two much cheaper than two steps; measured: ~25 req/s at 1 and 2 users), so the test asserts what
holds on any machine: beyond the slot count, throughput stops growing and requests queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engines.engines_support import RESEND, LlamaServer, read_jsonl, run_cli


@pytest.mark.timing  # a knee from live latency on two busy cores
def test_sweep_throughput_saturates_at_the_slot_count(
    start_llama_server: Callable[..., LlamaServer], tmp_path: Path
) -> None:
    server = start_llama_server(parallel=2, context=2048)
    out = tmp_path / "sweep.json"
    run_cli(
        "sweep", "--url", server.url, "--concurrency", "1,2,4", "-n", "16", "--input-len", "16",
        "--output-len", "40", "--keep-going", "--no-store", "-q", "--out", str(out), RESEND,
        timeout_s=180,
    )  # fmt: skip
    sweep = json.loads(out.read_text())
    steps: list[dict[str, Any]] = sweep["steps"]
    assert [s["conditions"]["load"]["concurrency"] for s in steps] == [1, 2, 4]
    for step in steps:
        records = read_jsonl(out.parent / step["records"]["path"])
        assert [r["status"] for r in records] == ["ok"] * 16
        assert step["summary"]["tokens"]["mismatched"] == 0
    rps = [s["summary"]["request_throughput"] for s in steps]
    ttft = [s["summary"]["ttft_ms"]["p50"] for s in steps]
    # Four users on two slots: no more throughput than the steps within the slot count ...
    assert rps[2] < 1.3 * max(rps[0], rps[1]), rps
    # ... because half of them wait for a free slot: median TTFT jumps by about a whole request
    # (measured ~10x on 2 cores), while up to the slot count no request queues.
    assert ttft[2] > 3 * max(ttft[0], ttft[1]), ttft
