"""vLLM bench serve's flag names and --vllm-json: the docs' command runs, and its file agrees with
tokenpace's own summary of the same run."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import pytest

from tokenpace.app.watch.preflight import resolve_model_when_ready
from tokenpace.sim import SimServer
from tokenpace.testing.procs import FINISHED, free_port, run_cli
from tokenpace.wire.endpoint import parse_endpoint

DOC = Path(__file__).resolve().parents[3] / "docs" / "vllm.md"


def _doc_command() -> list[str]:
    (line,) = [
        ln for ln in DOC.read_text().splitlines() if ln.startswith("tokenpace bench") and "--vllm-json" in ln
    ]
    return shlex.split(line)[1:]


def test_the_docs_command_writes_vllm_keys_that_agree_with_the_summary(tmp_path):
    r = run_cli(*_doc_command(), "--out", "result.json", cwd=str(tmp_path), timeout=180)
    assert r.returncode in FINISHED, r.stderr  # the keys agree whether or not the host kept up
    v = json.loads((tmp_path / "vllm.json").read_text())
    result = json.loads((tmp_path / "result.json").read_text())
    s = result["summary"]
    metrics = ("ttft", "tpot", "itl", "e2el")
    expected = {
        "date",
        "backend",
        "model_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
    } | {f"{k}_{m}_ms" for m in metrics for k in ("mean", "median", "std", "p50", "p99", "p99.9")}
    assert set(v) == expected
    assert v["completed"] == s["counts"]["ok"] == 12 and v["failed"] == 0 and v["num_prompts"] == 12
    for key, ours in (
        ("request_throughput", s["request_throughput"]),
        ("output_throughput", s["output_token_throughput"]),
        ("total_token_throughput", s["total_token_throughput"]),
        ("request_goodput", s["goodput"]),
        ("mean_ttft_ms", s["ttft_ms"]["mean"]),
        ("median_ttft_ms", s["ttft_ms"]["p50"]),
        ("p99_ttft_ms", s["ttft_ms"]["p99"]),
        ("mean_tpot_ms", s["tpot_ms"]["mean"]),
        ("p99_itl_ms", s["itl_ms"]["p99"]),
        ("median_e2el_ms", s["e2e_ms"]["p50"]),
    ):
        assert v[key] == pytest.approx(ours), key
    assert v["p99_ttft_ms"] <= v["p99.9_ttft_ms"] <= max(v["ttfts"]) * 1000 + 1e-9
    assert len(v["ttfts"]) == len(v["itls"]) == 12 and all(len(x) == 15 for x in v["itls"])
    assert sum(v["output_lens"]) == v["total_output_tokens"] == 12 * 16
    # the aliases took effect: warm-ups, the SLO, the cap, the rate, the extra body
    assert len(result["summary"]["counts"]) and result["conditions"]["load"]["warmup"] == 2
    assert s["slo"] == {"ttft_ms": 5000.0} and v["max_concurrency"] == 4 and v["request_rate"] == 50
    assert s["reasoning"] and s["ttfat_ms"]["n"] == 12  # {"reasoning_tokens": 3} reached the sim


def test_request_rate_inf_is_a_closed_loop_of_max_concurrency(tmp_path):
    r = run_cli(
        "bench",
        "--num-prompts",
        "6",
        "--request-rate",
        "inf",
        "--max-concurrency",
        "3",
        "--output-len",
        "4",
        "--out",
        "r.json",
        cwd=str(tmp_path),
    )
    assert r.returncode in FINISHED, r.stderr  # NOT VALID on a busy host: the load asked is what counts
    load = json.loads((tmp_path / "r.json").read_text())["conditions"]["load"]
    assert (load["mode"], load["concurrency"], load["requests"]) == ("closed_loop", 3, 6)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--extra-body", "[1]"], "--extra-body"),
        (["--extra-body", "{nope"], "--extra-body"),
        (["--goodput", "speed:5"], "--goodput"),
        (["--metric-percentiles", "0"], "--metric-percentiles"),
        (["--percentile-metrics", "ttft,latency"], "--percentile-metrics"),
        (["--request-rate", "fast"], "--request-rate"),
        (["--requests", "5", "--num-prompts", "6"], "--num-prompts"),
    ],
)
def test_bad_vllm_flags_get_one_line_and_exit_2(args, says):
    r = run_cli("bench", *args)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr


def test_ready_check_waits_for_a_server_that_starts_late():
    port = free_port()

    async def go():
        async def start_later():
            await asyncio.sleep(0.3)
            return await SimServer(port=port).start()

        starting = asyncio.create_task(start_later())
        endpoint = parse_endpoint(f"http://127.0.0.1:{port}/v1")
        model, _ = await resolve_model_when_ready(endpoint, None, {}, wait_s=20)
        srv = await starting
        await srv.stop()
        return model

    assert asyncio.run(go())
