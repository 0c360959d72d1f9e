"""vLLM's sonnet dataset: a text file of poem lines, made into prompts the way `vllm bench serve
--dataset-name sonnet` makes them: an instruction, the first lines of the poem as a prefix every
prompt shares, then lines picked at random (seeded) up to the input length. Lengths are counted with
tokenpace's word estimate (or the run's tokenizer); the chat template's tokens are not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tokenpace.adapters.bounded_read import FileBoundError, read_text
from tokenpace.adapters.datasets.rows import fail
from tokenpace.core.workload import DatasetEntry
from tokenpace.core.workload.prompts import TokenCounter, WordEstimate

INSTRUCTION = "Pick as many lines as you can from these poem lines:\n"
MAX_LINES = 100_000  # a poem, not a corpus: a bigger file is refused
MAX_POEM_BYTES = 4 * 1024 * 1024  # the poem file, read whole (vLLM's sonnet.txt is 30 KB)
MAX_ENTRIES = 100_000  # prompts made up front (one per measured request, up to this)


def sonnet_entries(
    path: str | Path,
    count: int,
    input_len: int,
    output_len: int,
    prefix_len: int,
    seed: int = 0,
    counter: TokenCounter | None = None,
) -> tuple[list[DatasetEntry], dict[str, Any]]:
    """``count`` prompts of about ``input_len`` tokens (the instruction included) sharing the first
    ``prefix_len`` tokens' worth of lines; raises DatasetError."""
    path = Path(path)
    try:
        text = read_text(path, MAX_POEM_BYTES, "a poem file")
    except FileBoundError as exc:
        raise fail(path, None, exc.reason) from None
    except OSError as exc:
        raise fail(path, None, f"cannot read the poem: {exc.strerror or exc}") from None
    lines = [ln + "\n" for ln in text.splitlines() if ln.strip()][: MAX_LINES + 1]
    if not lines or len(lines) > MAX_LINES:
        raise fail(path, None, f"expected 1 to {MAX_LINES} lines of text, one poem line each")
    counter = counter or WordEstimate()
    per_line = sum(counter.count(ln) for ln in lines) / len(lines) or 1.0
    base = counter.count(INSTRUCTION)
    if input_len <= base:
        raise fail(path, None, f"--sonnet-input-len {input_len}: must exceed the instruction ({base} tokens)")
    input_lines = max(round((input_len - base) / per_line), 1)
    prefix_lines = min(max(round((prefix_len - base) / per_line), 0), input_lines)
    prefix = "".join(lines[:prefix_lines])
    rng = np.random.default_rng(seed)
    entries = []
    for i in range(min(max(count, 1), MAX_ENTRIES)):
        picks = rng.integers(0, len(lines), size=input_lines - prefix_lines)
        prompt = INSTRUCTION + prefix + "".join(lines[j] for j in picks)
        entries.append(DatasetEntry(turns=(prompt,), output_len=output_len, line=i + 1))
    source = {"dataset": str(path), "format": "sonnet", "lines": len(lines), "prefix_lines": prefix_lines}
    return entries, source
