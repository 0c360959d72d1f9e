"""A request inside the engine model (engine.py) and its states; its own module so that the pieces
the engine is split into (lazy_decode.py, fast_forward.py) can name it without an import cycle."""

from __future__ import annotations

from typing import Any, Final

# Final: compiled code (native.py) inlines them instead of looking each up by name.
WAITING: Final = "waiting"
RUNNING: Final = "running"
FINISHED: Final = "finished"
ABORTED: Final = "aborted"


class SimRequest:
    """Identity-compared (two requests are never equal); a plain class with its own __init__, so that
    making one per arrival is one call (the virtual runner makes millions; compiled, see native.py)."""

    __slots__ = (
        "aborted",
        "arrival_t",
        "blocks",
        "cached_tokens",
        "client_limit",
        "finish_reason",
        "finish_t",
        "first_token_t",
        "generated",
        "hashes",
        "ignore_eos",
        "last_token_t",
        "lz",
        "lz_fin",
        "max_tokens",
        "min_tokens",
        "num_computed",
        "preemptions",
        "private_blocks",
        "prompt",
        "prompt_len",
        "registered",
        "rid",
        "scheduled_t",
        "seq",
        "sink",
        "state",
        "target_len",
    )

    def __init__(
        self,
        rid: str,
        prompt: list[str],
        max_tokens: int,
        min_tokens: int = 0,
        ignore_eos: bool = False,
        sink: Any = None,
        client_limit: bool = True,
        prompt_len: int = 0,
    ) -> None:
        self.rid = rid
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.ignore_eos = ignore_eos
        self.sink: Any = sink  # the runner's handle (the HTTP stream, a record)
        # max_tokens is the client's own limit ("length" when reached); else the server's default
        # cap, where the model is taken to stop by itself ("stop"), as a real model does long before.
        self.client_limit = client_limit
        # Set by the engine:
        self.prompt_len = prompt_len
        self.target_len = 0  # tokens this request will generate
        self.finish_reason = "length"
        self.hashes: list[int] = []
        self.state = WAITING
        self.num_computed = 0
        self.generated = 0
        self.blocks: list[int] = []
        self.registered = 0  # prompt blocks already offered to the prefix cache
        # Trailing block hashes no other request can have (a virtual run's unique filler): until its
        # first preemption, only that request could ever look them up, so they are offered to the
        # prefix cache only if it is preempted (engine.py). 0: none known (a real prompt).
        self.private_blocks = 0
        self.cached_tokens = 0  # prefix-cache hit at first admission
        self.preemptions = 0
        self.aborted = False
        self.arrival_t = 0.0
        self.scheduled_t: float | None = None  # first time it got into a step
        self.first_token_t: float | None = None
        self.last_token_t: float | None = None
        self.finish_t: float | None = None
        self.seq = 0  # admission order: running is always in increasing seq
        self.lz = -1  # lazy decoding since this tick (lazy_decode.py); -1: fields are true
        self.lz_fin = 0  # while lazy: the tick whose step finishes it

    def __repr__(self) -> str:
        done = f"{self.num_computed}/{self.prompt_len}+{self.generated}"
        return f"SimRequest({self.rid!r}, {self.state}, {done})"

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated

    @property
    def finished(self) -> bool:
        return self.state == FINISHED
