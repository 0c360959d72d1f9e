"""The prefix cache of llama-server, seen in the server's own reports and in tokenpace's TTFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines.engines_support import LlamaServer, assert_exact_counts, bench, http_json
from tokenpace.core.workload import SyntheticWorkload
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.testing.tinymodel import MODEL_NAME, TEMPLATE_OVERHEAD

PROMPT_WORDS = 1200  # the shared server's slots hold 2048 tokens


def test_server_reports_the_cached_prefix(llama_server: LlamaServer) -> None:
    prompt = next(
        SyntheticWorkload(parse_length(str(PROMPT_WORDS)), parse_length("2"), seed=21).items()
    ).prompt
    full = PROMPT_WORDS + TEMPLATE_OVERHEAD

    def ask(cache: bool) -> dict[str, Any]:
        return http_json(
            llama_server.url + "/chat/completions",
            {
                "model": MODEL_NAME,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 2,
                "cache_prompt": cache,
            },
        )

    cold, warm, again = ask(cache=False), ask(cache=True), ask(cache=True)
    assert cold["usage"]["prompt_tokens"] == warm["usage"]["prompt_tokens"] == full
    # timings.prompt_n: prompt tokens the server evaluated for this request.
    assert cold["timings"]["prompt_n"] == full
    assert warm["timings"]["prompt_n"] < 0.1 * full
    assert again["timings"]["prompt_n"] < 0.1 * full
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] > 0.9 * full


def test_shared_prefixes_warm_ttft_below_cold(llama_server: LlamaServer, tmp_path: Path) -> None:
    """`bench --prefix-len 1000 --prefixes 4`: the first use of each prefix is cold, later ones warm."""
    prefix, unique, n = 1000, 24, 16
    result, records = bench(
        llama_server, tmp_path, "-c", "1", "-n", str(n), "--prefix-len", str(prefix), "--prefixes", "4",
        "--input-len", str(unique), "--output-len", "4", "--seed", "4",
        "--server-metrics", "auto", "--server-metrics-interval", "200ms",
    )  # fmt: skip
    assert_exact_counts(result, records, n)
    cold = [r for r in records if r["prefix_cold"]]
    assert len(cold) == len({r["prefix_id"] for r in records}) >= 2
    by_state = result["summary"]["breakdown"]["prefix"]
    assert by_state["cold"]["n"] == len(cold) and by_state["warm"]["n"] == n - len(cold)
    # Medians (not one wall-clock comparison): prefill of 1000 tokens against a cached prefix.
    assert by_state["warm"]["ttft_ms"]["p50"] < by_state["cold"]["ttft_ms"]["p50"]
    # The engine's own counter (scraped from /metrics during the run) says what it evaluated:
    # whole prompts for the cold requests, little more than the unique tails for the warm ones.
    evaluated = result["server_metrics"]["counters"]["prompt_tokens"]
    full = prefix + unique + SALT_TOKENS + TEMPLATE_OVERHEAD  # the run's salt comes before the prefix
    assert (
        len(cold) * full <= evaluated <= len(cold) * full + (n - len(cold)) * (unique + 2 * TEMPLATE_OVERHEAD)
    )
