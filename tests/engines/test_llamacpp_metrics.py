"""`bench --server-metrics`: llama.cpp's own /metrics scraped during a run."""

from __future__ import annotations

from pathlib import Path

from engines.engines_support import LlamaServer, assert_exact_counts, bench, read_jsonl
from tokenpace.core.workload.salt import SALT_TOKENS


def test_auto_scrapes_llamacpp_metrics_during_the_run(llama_server: LlamaServer, tmp_path: Path) -> None:
    n = 24
    result, records = bench(
        llama_server, tmp_path, "-c", "4", "-n", str(n), "--input-len", "64", "--output-len", "8:32",
        "--seed", "13", "--server-metrics-interval", "100ms",
    )  # fmt: skip
    assert_exact_counts(result, records, n)
    metrics = result["server_metrics"]
    assert metrics["engine"] == "llama.cpp"
    assert metrics["source"] == "auto"
    assert metrics["url"] == llama_server.base + "/metrics"
    assert metrics["errors"] == 0
    assert metrics["scrapes"] >= 2
    # Counter deltas over the run: the engine generated exactly what the client counted ...
    generated = sum(r["output_tokens_server"] for r in records)
    assert metrics["counters"]["generation_tokens"] == generated
    # ... and evaluated the prompts (all but what a slot may still hold of the last one: a few
    # template tokens and the run's prompt salt, which every prompt of a run starts with).
    prompts = sum(r["prompt_tokens"] for r in records)
    assert prompts - n * (4 + SALT_TOKENS) <= metrics["counters"]["prompt_tokens"] <= prompts
    # Slot occupancy never exceeds the server's 4 slots, and was seen busy.
    running = [v for _, v in metrics["series"]["running"]]
    assert 1 <= max(running) <= 4
    # The raw scrapes keep llama.cpp's own names.
    raw = read_jsonl(Path(metrics["raw_file"]))
    assert len(raw) == metrics["scrapes"]
    names = set(raw[-1]["samples"])
    assert {"llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_total"} <= names
    delta = (
        raw[-1]["samples"]["llamacpp:tokens_predicted_total"]
        - raw[0]["samples"]["llamacpp:tokens_predicted_total"]
    )
    assert delta == generated


def test_off_scrapes_nothing(llama_server: LlamaServer, tmp_path: Path) -> None:
    result, records = bench(
        llama_server, tmp_path, "-c", "2", "-n", "4", "--input-len", "16", "--output-len", "4",
        "--server-metrics", "off",
    )  # fmt: skip
    assert_exact_counts(result, records, 4)
    assert "server_metrics" not in result or not result["server_metrics"]
    assert not list(tmp_path.glob("*.server-metrics.jsonl"))
