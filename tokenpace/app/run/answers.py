"""The answer text of a response's captured chunks: the next turn's history in a session, and
vLLM's ``generated_texts`` with ``--save-detailed``."""

from __future__ import annotations

import orjson


def answer_text(chunks: list[bytes]) -> str:
    """The answer text of captured chunks (chat deltas, completion text or a whole response);
    reasoning text is left out, as chat clients leave it out of the history."""
    parts: list[str] = []
    for raw in chunks:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        for choice in (obj.get("choices") or []) if isinstance(obj, dict) else []:
            msg = choice.get("delta") or choice.get("message") or {}
            text = msg.get("content") if isinstance(msg, dict) else None
            if text is None:
                text = choice.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)
