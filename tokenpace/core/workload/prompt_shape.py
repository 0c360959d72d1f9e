"""The shape of a prompt without its text: how long it is and which leading blocks it shares with
other prompts. The gateway keeps this for every request it measures, so a replay of its records can
rebuild the production mix (lengths, shared prefixes, arrival times) without storing what users wrote.

Blocks are ``BLOCK_CHARS`` characters (about 512 tokens at ~4 characters a token, Mooncake's block
size); the hash of block i covers blocks 0..i (a chain), so two prompts share hash i exactly when
their first i+1 blocks are equal. At most ``MAX_BLOCKS`` hashes are kept (the first ~64 k tokens):
a prefix cache rarely matters past that, and the record stays small. Pure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

BLOCK_CHARS = 2048
MAX_BLOCKS = 128
MAX_KEPT_TEXT = 256 * 1024  # characters of prompt text kept when an operator opted in


@dataclass(frozen=True, slots=True)
class PromptShape:
    chars: int
    block_hashes: tuple[int, ...]
    text: str | None = None  # only when the operator opted in to keeping prompts


def _text_of(part: Any, out: list[str]) -> None:
    """Every piece of text in a message content, whatever the API's shape (string, parts list)."""
    if isinstance(part, str):
        out.append(part)
    elif isinstance(part, list):
        for item in part:
            _text_of(item, out)
    elif isinstance(part, dict):
        for key in ("text", "content", "input_text"):
            if key in part:
                _text_of(part[key], out)


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt a request body carries, for any of the dialects: chat and Anthropic `messages`
    (with Anthropic's `system`), Responses' `instructions` and `input`, completions' `prompt`,
    embeddings' `input`. Parts are joined by a newline, in the order the model reads them."""
    out: list[str] = []
    for key in ("system", "instructions"):
        _text_of(body.get(key), out)
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                _text_of(message.get("content"), out)
    for key in ("prompt", "input"):
        _text_of(body.get(key), out)
    return "\n".join(out)


def prompt_shape(body: dict[str, Any], keep_text: bool = False) -> PromptShape:
    text = prompt_text(body)
    hashes: list[int] = []
    chain = hashlib.blake2b(digest_size=8)
    full = min(len(text) // BLOCK_CHARS, MAX_BLOCKS)
    for i in range(full):
        chain.update(text[i * BLOCK_CHARS : (i + 1) * BLOCK_CHARS].encode("utf-8", "surrogatepass"))
        # 63 bits: a JSON integer any reader keeps exactly
        hashes.append(int.from_bytes(chain.digest(), "big") >> 1)
    kept = text[:MAX_KEPT_TEXT] if keep_text else None
    return PromptShape(len(text), tuple(hashes), kept)
