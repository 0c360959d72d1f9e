"""Issue 40: a replay of captured records whose chat template cannot be estimated used to send each
prompt at the server's count (the template's tokens on top) without a word. Now the run warns and
says how many; `--trace-template-tokens K` takes a stated template off those prompts."""

from __future__ import annotations

import json
from pathlib import Path

from baseline_fixtures import served, tokenpace

from tokenpace.testing.scripted_server import Script

WORDS = [40, 90, 150]  # three records, lengths too few to fit the template: it stays unknown


def _captured(tmp_path: Path) -> Path:
    path = tmp_path / "captured.jsonl"
    lines = [
        {"request_id": f"g{i}", "status": "ok", "sent_ns": 100_000_000 * i, "labels": {},
         "prompt_tokens": w + 7, "prompt_chars": 5 * w, "output_tokens": 4}
        for i, w in enumerate(WORDS)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def _replay(url: str, trace: Path, out: Path, *more: str) -> tuple[dict, list[dict]]:
    done = tokenpace("bench", "--url", url, "--model", "m", "--trace", str(trace), "--no-store", "-q",
                     "--out", str(out), *more)  # fmt: skip
    assert done.returncode in (0, 3), done.stderr  # 3: NOT VALID on a busy host, results written
    records = [json.loads(x) for x in out.with_suffix(".records.jsonl").read_text().splitlines()]
    return json.loads(out.read_text()), records


def test_an_unknown_template_is_warned_of_and_a_stated_one_comes_off(tmp_path: Path) -> None:
    trace = _captured(tmp_path)
    with served(Script(ttft_s=0.001, itl_s=0.001, tokens=4)) as srv:
        plain, plain_recs = _replay(srv.url, trace, tmp_path / "plain.json")
        given, given_recs = _replay(srv.url, trace, tmp_path / "given.json", "--trace-template-tokens", "7")
        wide = tokenpace("bench", "--url", srv.url, "--trace", str(trace), "--trace-template-tokens", "99",
                         "--no-store")  # fmt: skip
        alone = tokenpace("bench", "--url", srv.url, "--trace-template-tokens", "7", "--no-store")
    said = "replayed prompts were sent at the captured server's count"
    warned = [w for w in plain["warnings"] if said in w]
    assert warned and warned[0].startswith("3 of 3 ") and "--trace-template-tokens K" in warned[0]
    assert plain["conditions"]["workload"]["filled"]["input_with_template"] == 3
    assert sorted(r["prompt_tokens_requested"] for r in plain_recs) == [w + 7 for w in WORDS]
    # stated: each prompt as long as captured, and no warning left
    assert not [w for w in given["warnings"] if "captured server's count" in w]
    assert given["conditions"]["workload"]["template_tokens"] == {"tokens": 7, "from": "given"}
    assert sorted(r["prompt_tokens_requested"] for r in given_recs) == WORDS
    assert wide.returncode == 2 and "--trace-template-tokens 99: give 0 to 64" in wide.stderr
    assert alone.returncode == 2 and "is for --trace of request records" in alone.stderr
