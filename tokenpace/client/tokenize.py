"""The server's own ``/tokenize`` (vLLM, SGLang, llama.cpp, tokenpace sim) as a token counter: which of
the built-in words it counts as one token each. Asked once, before any load."""

from __future__ import annotations

import asyncio
from typing import Any

from tokenpace.core.workload.prompts import CheckedWords, TokenizerError
from tokenpace.core.workload.words import WORDS
from tokenpace.wire.dialects import api_root
from tokenpace.wire.endpoint import Endpoint


def tokenize_url(endpoint: Endpoint) -> str:
    """/tokenize lives at the server root (vLLM, llama.cpp), beside /v1."""
    base = api_root(endpoint.base_path).removesuffix("/v1")
    return f"{endpoint.scheme}://{endpoint.host_header}{base}/tokenize"


async def server_words(
    endpoint: Endpoint, model: str, headers: dict[str, str], timeout_s: float = 30.0
) -> CheckedWords:
    """The built-in words the server counts as one token each (one /tokenize call when they all
    are, one per word otherwise); raises TokenizerError when /tokenize does not answer."""
    import aiohttp

    url = tokenize_url(endpoint)
    sem = asyncio.Semaphore(16)

    async def count(session: aiohttp.ClientSession, text: str) -> int:
        # vLLM and the sim read "prompt", llama.cpp reads "content"; special tokens left out.
        body = {"model": model, "prompt": text, "content": text, "add_special_tokens": False}
        async with sem, session.post(url, json=body, headers=headers) as resp:
            if resp.status != 200:
                raise TokenizerError(f"--tokenizer server: {url} answered HTTP {resp.status}")
            data: Any = await resp.json(content_type=None)
        if isinstance(data, dict) and isinstance(count := data.get("count"), int):
            return count
        if isinstance(data, dict) and isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        raise TokenizerError(f"--tokenizer server: {url} gave no 'tokens' or 'count'")

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            empty = await count(session, "")
            whole = await count(session, " ".join(WORDS)) - empty
            if whole == len(WORDS):
                return CheckedWords(WORDS, url, {"words_checked": len(WORDS), "all_single_tokens": True})
            base = await count(session, "the")
            costs = await asyncio.gather(*(count(session, f"the {w}") for w in WORDS))
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        if isinstance(exc, TokenizerError):
            raise
        raise TokenizerError(f"--tokenizer server: cannot use {url}: {exc or type(exc).__name__}") from None
    kept = tuple(w for w, c in zip(WORDS, costs, strict=True) if c - base == 1)
    if len(kept) < 16:
        raise TokenizerError(f"--tokenizer server: only {len(kept)} of the built-in words are one token")
    return CheckedWords(kept, url, {"words_checked": len(WORDS), "single_token_words": len(kept)})
