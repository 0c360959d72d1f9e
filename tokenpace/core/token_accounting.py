"""Where a run's token counts came from, and how far the server's counts and the chunk counts agree. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenpace.core.record import RequestRecord, TokenSource


@dataclass(slots=True)
class TokenAccounting:
    output_sources: dict[str, int]
    compared: int  # ok requests with both a server count and a chunk count
    mismatched: int  # ... where they differ
    max_abs_diff: int
    tokens_per_chunk: float | None  # server output tokens / token-carrying chunks
    prompt_compared: int  # requests with both an asked and a server-reported prompt length
    prompt_mean_ratio: float | None  # server-reported / asked

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_sources": self.output_sources,
            "compared": self.compared,
            "mismatched": self.mismatched,
            "max_abs_diff": self.max_abs_diff,
            "tokens_per_chunk": self.tokens_per_chunk,
            "prompt_compared": self.prompt_compared,
            "prompt_server_over_asked": self.prompt_mean_ratio,
        }


def token_accounting(ok: Sequence[RequestRecord]) -> TokenAccounting:
    sources = {s.value: 0 for s in TokenSource}
    compared = mismatched = max_diff = 0
    server_total = chunk_total = 0
    prompt_n = 0
    prompt_ratio_sum = 0.0
    for r in ok:
        sources[r.output_tokens_source.value] += 1
        if r.output_tokens_server is not None and r.output_tokens_counted and not r.usage_implausible:
            compared += 1
            diff = abs(r.output_tokens_counted - r.output_tokens_server)
            mismatched += diff > 0
            max_diff = max(max_diff, diff)
            server_total += r.output_tokens_server
            chunk_total += r.output_tokens_counted
        if r.prompt_tokens is not None and r.prompt_tokens_requested:
            prompt_n += 1
            prompt_ratio_sum += r.prompt_tokens / r.prompt_tokens_requested
    return TokenAccounting(
        output_sources={k: v for k, v in sources.items() if v},
        compared=compared,
        mismatched=mismatched,
        max_abs_diff=max_diff,
        tokens_per_chunk=server_total / chunk_total if chunk_total else None,
        prompt_compared=prompt_n,
        prompt_mean_ratio=prompt_ratio_sum / prompt_n if prompt_n else None,
    )
