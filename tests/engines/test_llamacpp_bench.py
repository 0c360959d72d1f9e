"""`tokenpace bench` against llama.cpp's llama-server: counts, TTFT anchor, exact input lengths."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from engines.engines_support import LlamaServer, assert_exact_counts, bench, http_json
from tokenpace.core.workload import SyntheticWorkload
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.testing.tinymodel import MODEL_NAME, TEMPLATE_OVERHEAD


def test_closed_loop_counts_equal_server_usage(llama_server: LlamaServer, tmp_path: Path) -> None:
    result, records = bench(
        llama_server,
        tmp_path,
        "-c",
        "4",
        "-n",
        "24",
        "--input-len",
        "32:160",
        "--output-len",
        "4:24",
        "--seed",
        "3",
    )
    assert_exact_counts(result, records, 24)
    assert result["conditions"]["model"] == MODEL_NAME
    # Lengths really varied, so the equalities above are not one number repeated.
    assert len({r["output_tokens_server"] for r in records}) > 3
    assert len({r["prompt_tokens"] for r in records}) > 3


def test_open_loop_counts_equal_server_usage(llama_server: LlamaServer, tmp_path: Path) -> None:
    result, records = bench(
        llama_server,
        tmp_path,
        "-r",
        "10",
        "--arrival",
        "poisson",
        "-n",
        "20",
        "--input-len",
        "48",
        "--output-len",
        "12",
        "--seed",
        "5",
    )
    assert_exact_counts(result, records, 20)
    assert result["conditions"]["load"]["mode"] == "open_loop"
    # Open loop: sends follow the schedule's offsets (Poisson gaps, not back to back).
    scheduled = sorted(r["scheduled_ns"] for r in records)
    assert len(set(scheduled)) == 20
    assert all(r["prompt_tokens"] == 48 + SALT_TOKENS + TEMPLATE_OVERHEAD for r in records)


def test_first_chat_chunk_has_null_content(llama_server: LlamaServer) -> None:
    """The premise of the TTFT-anchor checks above: llama.cpp opens a chat stream with content null."""
    body = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": "the world"}],
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        llama_server.url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    chunks = []
    with urllib.request.urlopen(req, timeout=60) as resp:
        for line in resp:
            line = line.strip()
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunks.append(json.loads(line[6:]))
    first = chunks[0]["choices"][0]["delta"]
    assert "content" in first and first["content"] is None
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    usage = next(c["usage"] for c in chunks if c.get("usage"))
    assert len(content) == usage["completion_tokens"] == 6


def test_tokenize_endpoint_counts_synthetic_prompts_exactly(llama_server: LlamaServer) -> None:
    """tokenpace's synthetic prompts are N words; the server's /tokenize says N tokens."""
    workload = SyntheticWorkload(parse_length("1:300"), parse_length("8"), seed=11)
    items = workload.items()
    for _ in range(12):
        item = next(items)
        tokens = http_json(llama_server.base + "/tokenize", {"content": item.prompt})["tokens"]
        assert len(tokens) == item.input_tokens


@pytest.mark.parametrize("source", ["server", "local"])
def test_tokenizer_option_gives_exact_input_lengths(
    llama_server: LlamaServer, tiny_model: Path, tmp_path: Path, source: str
) -> None:
    """`--tokenizer server` (the endpoint's /tokenize) and `--tokenizer DIR` (the model's own
    tokenizer.json): the server counts exactly the asked tokens plus the chat template's."""
    tokenizer = "server" if source == "server" else str(tiny_model / "hf")
    result, records = bench(
        llama_server, tmp_path, "-c", "2", "-n", "10", "--input-len", "20:300", "--output-len", "4",
        "--tokenizer", tokenizer, "--seed", "9",
    )  # fmt: skip
    assert_exact_counts(result, records, 10)
    described = result["conditions"]["workload"]["tokenizer"]
    assert described["kind"] == ("server" if source == "server" else "tokenizer")
    if source == "server":
        assert described["verified"]["all_single_tokens"] is True
    check = result["summary"]["prompt_tokens_check"]
    assert check["compared"] == 10
    # The only difference between asked and served is the template around the message.
    assert check["mean_abs_diff_tokens"] == TEMPLATE_OVERHEAD
    assert check["server_total"] - check["asked_total"] == 10 * TEMPLATE_OVERHEAD
