"""A request inside the engine model (engine.py) and its states; its own module so that the pieces
the engine is split into (lazy_decode.py, fast_forward.py) can name it without an import cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


@dataclass(eq=False, slots=True)
class SimRequest:
    rid: str
    prompt: list[str]
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    sink: Any = None  # the runner's handle (the HTTP stream, a record)
    # max_tokens is the client's own limit ("length" when reached); else the server's default cap,
    # where the model is taken to stop by itself ("stop"), as a real model does long before it.
    client_limit: bool = True
    # Set by the engine:
    prompt_len: int = 0
    target_len: int = 0  # tokens this request will generate
    finish_reason: str = "length"
    hashes: list[int] = field(default_factory=list)
    state: str = WAITING
    num_computed: int = 0
    generated: int = 0
    blocks: list[int] = field(default_factory=list)
    registered: int = 0  # prompt blocks already offered to the prefix cache
    # Trailing block hashes no other request can have (a virtual run's unique filler): until its
    # first preemption, only that request could ever look them up, so they are offered to the
    # prefix cache only if it is preempted (engine.py). 0: none known (a real prompt).
    private_blocks: int = 0
    cached_tokens: int = 0  # prefix-cache hit at first admission
    preemptions: int = 0
    aborted: bool = False
    arrival_t: float = 0.0
    scheduled_t: float | None = None  # first time it got into a step
    first_token_t: float | None = None
    last_token_t: float | None = None
    finish_t: float | None = None
    seq: int = 0  # admission order: running is always in increasing seq
    lz: int = -1  # lazy decoding since this tick (lazy_decode.py); -1: fields are true
    lz_fin: int = 0  # while lazy: the tick whose step finishes it

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated

    @property
    def finished(self) -> bool:
        return self.state == FINISHED
