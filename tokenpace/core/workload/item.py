"""What one request of a workload is (WorkItem), what every workload offers (Workload), and the
seed helper that makes a workload the same in every process."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(slots=True)
class WorkItem:
    index: int
    prompt: str
    input_tokens: int  # asked (words in the synthetic prompt)
    output_tokens: int  # asked (max_tokens)
    messages: list[dict[str, str]] | None = None  # a chat to send as it is (else one user message)
    prefix_id: int | None = None  # which shared prefix the prompt starts with
    prefix_cold: bool | None = None  # first request of the workload to use that prefix


class Workload(Protocol):
    """Every source of requests: an endless (or finite) seeded stream of items, and its own
    description for the result's conditions."""

    def items(self) -> Iterator[WorkItem]: ...

    def describe(self) -> dict[str, Any]: ...


def stable_seed(*parts: Any) -> int:
    """A seed from values, the same in every process (``hash`` of a str is not)."""
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")
