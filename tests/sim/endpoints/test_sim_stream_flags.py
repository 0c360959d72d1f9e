"""The sim's --reasoning-tokens, --tokens-per-chunk and --usage-every-chunk flags, as a user runs them."""

from __future__ import annotations

import json
import urllib.request

from tokenpace.app.serving.simproc import SimProcess


def _chat(url: str, **extra) -> list[dict]:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "stream": True, **extra}
    req = urllib.request.Request(
        url + "/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        lines = resp.read().decode().split("\n\n")
    return [json.loads(x[6:]) for x in lines if x.startswith("data: {")]


def test_flags_set_reasoning_and_chunking_for_every_request():
    args = ["--reasoning-tokens", "2", "--tokens-per-chunk", "2", "--usage-every-chunk"]
    with SimProcess(extra_args=args) as url:
        events = _chat(url)
        plain = _chat(url, reasoning_tokens=0, tokens_per_chunk=1)
    deltas = [e["choices"][0]["delta"] for e in events[1:] if e["choices"] and e["choices"][0]["delta"]]
    assert deltas == [
        {"reasoning_content": " lorem ipsum"},
        {"content": " dolor sit"},
        {"content": " amet consectetur"},
    ]
    assert [e["usage"]["completion_tokens"] for e in events[1:4]] == [2, 4, 6]
    assert sum(1 for e in plain if e["choices"] and e["choices"][0]["delta"].get("content")) == 6
