"""The files a run reads or writes on a user's behalf: prompt datasets and length logs, the built-in
sonnet, a local tokenizer (the `tokenizers` library loads only when one is asked for), vLLM's result
JSON. The CLI reads them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.adapters.datasets import DATASET_FORMATS, load_dataset, read_length_pairs
from tokenpace.adapters.datasets.sonnet import sonnet_entries
from tokenpace.adapters.tokenizer import load_tokenizer
from tokenpace.adapters.vllm_json import METRICS, VllmExport, default_file_name

__all__ = [
    "DATASET_FORMATS",
    "METRICS",
    "VllmExport",
    "default_file_name",
    "load_dataset",
    "load_tokenizer",
    "read_length_pairs",
    "sonnet_entries",
]
