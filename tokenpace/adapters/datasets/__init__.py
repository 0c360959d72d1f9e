"""Readers of workload files: prompt datasets, length logs and traces. Each error names the file and
the line, and is raised before any load is sent."""

from __future__ import annotations

from tokenpace.adapters.datasets.lengths import read_length_pairs
from tokenpace.adapters.datasets.prompts import DATASET_FORMATS, load_dataset
from tokenpace.adapters.datasets.rows import DatasetError
from tokenpace.adapters.datasets.trace import TRACE_LAYOUTS, read_trace

__all__ = [
    "DATASET_FORMATS",
    "TRACE_LAYOUTS",
    "DatasetError",
    "load_dataset",
    "read_length_pairs",
    "read_trace",
]
