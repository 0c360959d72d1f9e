"""Prompt datasets: a JSONL of prompts, ShareGPT conversations, OpenAI-format request logs.

prompts   {"prompt": "...", "output_len": 128}          output_len optional (also max_tokens)
sharegpt  {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}
openai    {"messages": [{"role": "user", "content": "..."}], "max_tokens": 128}
          (also nested as {"body": {...}} or {"request": {...}}, as batch files and logs write them)

The format is detected from the first record unless given; every record must then follow it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.adapters.datasets.rows import fail, json_records, whole_number
from tokenpace.core.workload import DatasetEntry

DATASET_FORMATS = ("auto", "prompts", "sharegpt", "openai")
_OUTPUT_KEYS = ("output_len", "output_tokens", "max_tokens", "max_completion_tokens")
_HUMAN = ("human", "user")
_BOT = ("gpt", "assistant", "chatgpt", "bing", "bard", "model")


def detect(obj: dict[str, Any]) -> str | None:
    if "conversations" in obj or "conversation" in obj:
        return "sharegpt"
    if "messages" in obj or isinstance(obj.get("body"), dict) or isinstance(obj.get("request"), dict):
        return "openai"
    if "prompt" in obj:
        return "prompts"
    return None


def _output_len(obj: dict[str, Any], path: Path, line: int) -> int | None:
    for key in _OUTPUT_KEYS:
        if obj.get(key) is not None:
            return whole_number(obj[key], path, line, key)
    return None


def _text(value: Any, path: Path, line: int, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI content parts: keep the text parts
        return " ".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    if value is None:
        return ""
    raise fail(path, line, f"{what} must be text, not {type(value).__name__}")


def _prompt(obj: dict[str, Any], path: Path, line: int) -> DatasetEntry | None:
    if "prompt" not in obj:
        raise fail(path, line, 'no \'prompt\' field (expected {"prompt": "..."} on every line)')
    text = _text(obj["prompt"], path, line, "'prompt'")
    if not text.strip():
        raise fail(path, line, "'prompt' is empty")
    return DatasetEntry(turns=(text,), output_len=_output_len(obj, path, line), line=line)


def _sharegpt(obj: dict[str, Any], path: Path, line: int) -> DatasetEntry | None:
    conv = obj.get("conversations", obj.get("conversation"))
    if not isinstance(conv, list):
        raise fail(path, line, "no 'conversations' list (expected ShareGPT records)")
    turns: list[str] = []
    replies: list[str] = []
    for i, msg in enumerate(conv):
        if not isinstance(msg, dict) or "value" not in msg or "from" not in msg:
            raise fail(path, line, f"conversations[{i}] needs 'from' and 'value'")
        who = str(msg["from"]).lower()
        text = _text(msg["value"], path, line, f"conversations[{i}].value")
        if who in _HUMAN:
            if len(replies) < len(turns):  # two human turns in a row: the first had no reply
                replies.append("")
            turns.append(text)
        elif who in _BOT and turns and len(replies) < len(turns):
            replies.append(text)
    if not turns or not turns[0].strip():
        return None  # no human turn to send (common in ShareGPT dumps): skipped, counted
    return DatasetEntry(turns=tuple(turns), replies=tuple(replies), line=line)


def _openai(obj: dict[str, Any], path: Path, line: int) -> DatasetEntry | None:
    req = obj
    for key in ("body", "request"):
        if isinstance(obj.get(key), dict) and "messages" in obj[key]:
            req = obj[key]
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise fail(path, line, "no 'messages' list (expected OpenAI chat requests)")
    clean = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or "role" not in m:
            raise fail(path, line, f"messages[{i}] needs a 'role'")
        clean.append(
            {"role": str(m["role"]), "content": _text(m.get("content"), path, line, f"messages[{i}]")}
        )
    users = [m["content"] for m in clean if m["role"] == "user"]
    return DatasetEntry(
        turns=(users[-1] if users else clean[-1]["content"],),
        output_len=_output_len(req, path, line),
        messages=tuple(clean),
        line=line,
    )


_READERS = {"prompts": _prompt, "sharegpt": _sharegpt, "openai": _openai}


def load_dataset(path: str | Path, fmt: str = "auto") -> tuple[list[DatasetEntry], dict[str, Any]]:
    """Entries and a description (path, format, skipped records); raises DatasetError."""
    path = Path(path)
    if fmt not in DATASET_FORMATS:
        raise fail(path, None, f"unknown dataset format {fmt!r}; choose from {', '.join(DATASET_FORMATS)}")
    entries: list[DatasetEntry] = []
    skipped = 0
    for line, obj in json_records(path):
        if fmt == "auto":
            fmt = detect(obj) or ""
            if not fmt:
                raise fail(
                    path,
                    line,
                    "cannot tell the format: expected 'prompt', 'conversations' (ShareGPT) or "
                    f"'messages' (OpenAI); found keys {sorted(obj)[:6]}",
                )
        entry = _READERS[fmt](obj, path, line)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
    if not entries:
        raise fail(path, None, f"no usable records ({skipped} had no prompt to send)")
    return entries, {"dataset": str(path), "format": fmt, "skipped": skipped}
