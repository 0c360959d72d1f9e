"""The sim's embeddings request: one input or a bounded batch, each input its own vector."""

from __future__ import annotations

import orjson
import pytest

from tokenpace.sim.endpoints.api import ApiError, StreamDefaults
from tokenpace.sim.endpoints.embeddings_api import MAX_INPUTS, EmbeddingsFormat, parse_embeddings


def parse(given: object):
    return parse_embeddings({"input": given}, "m", 4096, StreamDefaults())


def test_a_batch_is_priced_as_all_its_tokens_with_one_vector_per_input():
    gen = parse(["a b", "c", [7, 8, 9]])
    assert gen.input_lengths == (2, 1, 3) and len(gen.prompt) == 6
    body = orjson.loads(EmbeddingsFormat(gen, "r", 0).full_response(1, len(gen.prompt), "stop"))
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert body["usage"]["prompt_tokens"] == 6
    again = orjson.loads(EmbeddingsFormat(parse("c"), "r", 0).full_response(1, 1, "stop"))
    assert again["data"][0]["embedding"] == body["data"][1]["embedding"]  # same text, same vector


@pytest.mark.parametrize(
    ("given", "says"),
    [(["x"] * (MAX_INPUTS + 1), "at most"), (["a", ""], "empty item"), ({"no": 1}, "a list of either")],
)
def test_bad_batches_are_refused_with_a_reason(given: object, says: str):
    with pytest.raises(ApiError) as info:
        parse(given)
    assert info.value.status == 400 and says in info.value.message
