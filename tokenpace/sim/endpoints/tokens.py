"""The sim's token convention, shared with tokenpace's client: a token is a whitespace-separated word.

Completions: the prompt's words. Chat: each message costs its content's words plus MESSAGE_OVERHEAD
template tokens (start marker, role, separator, end marker), and the prompt ends with REPLY_OVERHEAD
tokens that open the assistant's turn -- the way chat templates add tokens around messages. The
templated token sequence is what the prefix cache hashes, so a shared system prompt is a shared prefix.
Generated tokens are words from a fixed list, each emitted with a leading space (" lorem").
"""

from __future__ import annotations

import zlib
from typing import Any

MESSAGE_OVERHEAD = 4
REPLY_OVERHEAD = 3
VOCAB_SIZE = 128_000

WORDS: tuple[str, ...] = tuple(
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
    "et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip "
    "ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum eu fugiat "
    "nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt "
    "mollit anim id est laborum".split()
)


def output_word(i: int) -> str:
    """The i-th generated token (0-based), with its leading space."""
    return " " + WORDS[i % len(WORDS)]


def output_text(n: int) -> str:
    return "".join(output_word(i) for i in range(n))


def _content_text(content: Any) -> str:
    """Message content: a string, or OpenAI content parts (only text parts carry tokens here)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(parts)
    raise ValueError("message content must be a string or a list of content parts")


def chat_prompt_words(messages: list[dict[str, Any]]) -> list[str]:
    """The templated token sequence of a chat request."""
    words: list[str] = []
    for m in messages:
        role = str(m.get("role", "user"))
        words += ["<|start|>", role, "<|sep|>"]
        words += _content_text(m.get("content")).split()
        words.append("<|end|>")
    words += ["<|start|>", "assistant", "<|sep|>"]
    return words


def token_id(word: str) -> int:
    """A stable id for a word (for /tokenize), identical across processes."""
    return zlib.crc32(word.encode("utf-8")) % VOCAB_SIZE
