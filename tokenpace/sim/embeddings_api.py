"""The sim's ``POST /v1/embeddings``: one input per request, priced as a prefill (one engine step of
the prompt plus one token), answered whole with a deterministic vector."""

from __future__ import annotations

import math
from typing import Any

import orjson

from tokenpace.sim.api import ApiError, GenRequest, StreamDefaults, generation_from, prompt_of
from tokenpace.sim.tokens import token_id

DEFAULT_DIMENSIONS = 16


def parse_embeddings(
    body: dict[str, Any], default_model: str, max_len: int, defaults: StreamDefaults
) -> GenRequest:
    if "input" not in body:
        raise ApiError("'input' is required", param="input", code="missing_required_parameter")
    if body.get("stream"):
        raise ApiError("embeddings are not streamed", param="stream", code="unsupported_value")
    prompt = prompt_of({"prompt": body["input"]}, "completion")
    dims = body.get("dimensions", DEFAULT_DIMENSIONS)
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= 4096:
        raise ApiError(
            "'dimensions' must be an integer from 1 to 4096", param="dimensions", code="invalid_value"
        )
    gen_body = {"model": body.get("model", default_model), "max_tokens": 1, "ignore_eos": True}
    gen = generation_from(gen_body, "embeddings", default_model, max_len, StreamDefaults(), prompt)
    gen.dimensions = dims
    return gen


class EmbeddingsFormat:
    """A whole embeddings response (the sim never streams one)."""

    __slots__ = ("_dims", "_model", "_seed")

    def __init__(self, gen: GenRequest, rid: str, created: int) -> None:
        self._model, self._dims = gen.model, gen.dimensions or DEFAULT_DIMENSIONS
        self._seed = sum(token_id(w) for w in gen.prompt)  # the same text, the same vector

    def opening(self) -> bytes:
        return b""

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        return b""

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        return b""

    def malformed(self) -> bytes:
        return b""

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        raw = [math.sin(self._seed + i) for i in range(self._dims)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        vector = [x / norm for x in raw]
        return orjson.dumps(
            {
                "object": "list",
                "data": [{"object": "embedding", "index": 0, "embedding": vector}],
                "model": self._model,
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            }
        )
