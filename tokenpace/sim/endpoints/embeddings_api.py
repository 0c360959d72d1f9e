"""The sim's ``POST /v1/embeddings``: one input or a batch (as the real API: a list of strings or of
token-id lists, up to ``MAX_INPUTS``), priced as one prefill of all the batch's tokens plus one token,
answered whole with one deterministic vector per input, in order."""

from __future__ import annotations

import math
from typing import Any

import orjson

from tokenpace.sim.endpoints.api import ApiError, GenRequest, StreamDefaults, generation_from, prompt_of
from tokenpace.sim.endpoints.tokens import token_id

DEFAULT_DIMENSIONS = 16
MAX_INPUTS = 2048  # OpenAI's own bound on a batch


def parse_embeddings(
    body: dict[str, Any], default_model: str, max_len: int, defaults: StreamDefaults
) -> GenRequest:
    if "input" not in body:
        raise ApiError("'input' is required", param="input", code="missing_required_parameter")
    if body.get("stream"):
        raise ApiError("embeddings are not streamed", param="stream", code="unsupported_value")
    inputs = _inputs(body["input"])
    prompt = [word for words in inputs for word in words]
    dims = body.get("dimensions", DEFAULT_DIMENSIONS)
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= 4096:
        raise ApiError(
            "'dimensions' must be an integer from 1 to 4096", param="dimensions", code="invalid_value"
        )
    gen_body = {"model": body.get("model", default_model), "max_tokens": 1, "ignore_eos": True}
    gen = generation_from(gen_body, "embeddings", default_model, max_len, StreamDefaults(), prompt)
    gen.dimensions = dims
    gen.input_lengths = tuple(len(words) for words in inputs)
    return gen


def _inputs(given: Any) -> list[list[str]]:
    """Each input's tokens: a string, token ids, or a non-empty list of either (a batch)."""
    batch = isinstance(given, list) and given and all(isinstance(x, (str, list)) for x in given)
    items = given if batch else [given]
    if len(items) > MAX_INPUTS:
        raise ApiError(
            f"'input' holds {len(items)} items; at most {MAX_INPUTS}", param="input", code="invalid_value"
        )
    try:
        words = [prompt_of({"prompt": item}, "completion") for item in items]
    except ApiError:
        raise ApiError(
            "'input' must be a string, token ids, or a list of either", param="input", code="invalid_type"
        ) from None
    if not all(words):
        raise ApiError("'input' must not hold an empty item", param="input", code="invalid_value")
    return words


class EmbeddingsFormat:
    """A whole embeddings response (the sim never streams one)."""

    __slots__ = ("_dims", "_model", "_seeds")

    def __init__(self, gen: GenRequest, rid: str, created: int) -> None:
        self._model, self._dims = gen.model, gen.dimensions or DEFAULT_DIMENSIONS
        self._seeds: list[int] = []  # one per input: the same text, the same vector
        start = 0
        for n in gen.input_lengths or (len(gen.prompt),):
            self._seeds.append(sum(token_id(w) for w in gen.prompt[start : start + n]))
            start += n

    def opening(self) -> bytes:
        return b""

    def chunk(self, words: str, phase: int, last: bool, done: int) -> bytes:
        return b""

    def closing(self, reason: str, prompt_tokens: int, n_out: int) -> bytes:
        return b""

    def malformed(self) -> bytes:
        return b""

    def full_response(self, n_out: int, prompt_tokens: int, reason: str) -> bytes:
        data = [
            {"object": "embedding", "index": i, "embedding": self._vector(seed)}
            for i, seed in enumerate(self._seeds)
        ]
        return orjson.dumps(
            {
                "object": "list",
                "data": data,
                "model": self._model,
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            }
        )

    def _vector(self, seed: int) -> list[float]:
        raw = [math.sin(seed + i) for i in range(self._dims)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        return [x / norm for x in raw]
