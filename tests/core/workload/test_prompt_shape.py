"""The prompt's shape the gateway keeps: chained block hashes that say which prefixes are shared,
and the text only when asked."""

from tokenpace.core.workload.prompt_shape import BLOCK_CHARS, MAX_BLOCKS, prompt_shape, prompt_text

A = "a" * BLOCK_CHARS
B = "b" * BLOCK_CHARS


def _chat(*contents: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": c} for c in contents]}


def test_prompts_with_the_same_first_blocks_share_those_hashes_and_no_more():
    one = prompt_shape(_chat(A + B + "tail one"))
    two = prompt_shape(_chat(A + A + "tail two"))
    assert len(one.block_hashes) == len(two.block_hashes) == 2
    assert one.block_hashes[0] == two.block_hashes[0]
    assert one.block_hashes[1] != two.block_hashes[1]


def test_a_hash_covers_every_block_before_it():
    # the same second block after a different first one is not a shared prefix
    assert prompt_shape(_chat(A + B)).block_hashes[1] != prompt_shape(_chat(B + B)).block_hashes[1]


def test_a_short_prompt_has_a_length_and_no_block():
    shape = prompt_shape(_chat("hello"))
    assert shape.chars == 5 and shape.block_hashes == () and shape.text is None


def test_the_text_is_kept_only_when_asked():
    assert prompt_shape(_chat("hello"), keep_text=True).text == "hello"
    assert prompt_shape(_chat("hello")).text is None


def test_hashes_are_bounded_and_fit_a_json_integer():
    shape = prompt_shape(_chat("x" * BLOCK_CHARS * (MAX_BLOCKS + 5)))
    assert len(shape.block_hashes) == MAX_BLOCKS
    assert all(0 <= h < 2**63 for h in shape.block_hashes)


def test_every_dialect_s_prompt_is_read():
    assert prompt_text({"prompt": "p"}) == "p"
    assert prompt_text({"input": ["x", "y"]}) == "x\ny"
    assert prompt_text({"instructions": "be brief", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "hi"}]}]}) == "be brief\nhi"  # fmt: skip
    assert (
        prompt_text(
            {"system": "sys", "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}
        )
        == "sys\nq"
    )


def test_odd_shapes_and_lone_surrogates_do_not_raise():
    assert prompt_shape({"messages": [5, {"content": None}], "prompt": {"odd": 1}}).chars == 0
    assert prompt_shape(_chat("\ud800" * BLOCK_CHARS)).block_hashes
