"""Hugging Face `transformers serve --continuous-batching` on CPU: its wire quirks, as facts, and what
tokenpace makes of each (through its own client, and through the gateway where it applies).

Verified against transformers 5.17.0 (scripts/install-transformers-serve.sh): a stream ends with the
finish_reason chunk carrying usage and no `data: [DONE]`; there is no /metrics (404); a request with a
field it does not know is refused with HTTP 422; /v1/models lists the Hugging Face cache (or answers
HTTP 500 when there is none), never the model it serves; a request must name the served folder's path
as its model (else HTTP 400).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engines.engines_support import (
    DECOY_MODEL,
    TransformersServe,
    assert_exact_counts,
    bench,
    gateway_in_front,
    read_jsonl,
    run_cli,
    wait_records,
)
from tokenpace.core.workload.salt import SALT_TOKENS
from tokenpace.testing import procs
from tokenpace.testing.tinymodel import TEMPLATE_OVERHEAD

NO_REQUEST_SUCCEEDED = 4  # bench's exit status when every request failed


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def chat(server: TransformersServe, **extra: Any) -> dict[str, Any]:
    return {
        "model": server.model,
        "messages": [{"role": "user", "content": "the city of light"}],
        "max_tokens": 6,
        "stream": True,
        **extra,
    }


def test_stream_ends_with_finish_reason_and_usage_not_done(transformers_serve: TransformersServe) -> None:
    status, body = post(transformers_serve.url + "/chat/completions", chat(transformers_serve))
    assert status == 200
    events = [e.removeprefix(b"data: ") for e in body.split(b"\n\n") if e.strip()]
    assert b"[DONE]" not in events
    chunks = [json.loads(e) for e in events]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}  # an opener with no token
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 6
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    # usage on the last chunk, whether or not stream_options asked for it
    assert last["usage"]["completion_tokens"] == 6
    assert last["usage"]["prompt_tokens"] == 4 + TEMPLATE_OVERHEAD


def test_bench_records_streams_without_done_as_successes(
    transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    result, records = bench(
        transformers_serve, tmp_path, "--model", transformers_serve.model,
        "-c", "4", "-n", "16", "--input-len", "32:160", "--output-len", "4:24",
    )  # fmt: skip
    assert_exact_counts(result, records, 16)
    assert all(r["error"] is None for r in records)
    # what tokenpace sends by default (stream_options, temperature, top_p) is accepted: no
    # ignore_eos/min_tokens unless asked for
    assert result["conditions"]["sampling"]["ignore_eos"] is False


def test_unknown_request_fields_are_refused_with_422(
    transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    url = transformers_serve.url + "/chat/completions"
    status, body = post(url, chat(transformers_serve, ignore_eos=True))
    assert status == 422
    assert "ignore_eos" in json.loads(body)["detail"]
    # bench --ignore-eos sends vLLM's extension fields: every request is refused, and the run says so
    out = tmp_path / "r.json"
    done = procs.run_cli(
        "bench", "--url", transformers_serve.url, "--model", transformers_serve.model, "--ignore-eos",
        "-c", "1", "-n", "2", "--input-len", "8", "--output-len", "4", "--no-store", "-q", "--out", str(out),
        timeout=120,
    )  # fmt: skip
    assert done.returncode == NO_REQUEST_SUCCEEDED, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    records = read_jsonl(out.parent / json.loads(out.read_text())["records"]["path"])
    assert [r["status"] for r in records] == ["http_error"] * 2
    assert all("422" in r["error"] and "ignore_eos" in r["error"] for r in records)


def test_no_metrics_endpoint_is_reported_absent_not_fatal(
    transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    assert get(transformers_serve.base + "/metrics")[0] == 404
    # auto (the default): the run goes on and says the engine has none
    result, records = bench(
        transformers_serve, tmp_path, "--model", transformers_serve.model,
        "-c", "2", "-n", "4", "--input-len", "16", "--output-len", "4",
    )  # fmt: skip
    assert_exact_counts(result, records, 4)
    observers = result["conditions"]["observers"]
    assert observers["server_metrics"] is None
    assert observers["server_metrics_source"].startswith("auto: none")
    assert "404" in observers["server_metrics_source"]
    assert not result.get("server_metrics")
    # a --server-metrics URL given explicitly must answer: refused before any load, in one line
    done = procs.run_cli(
        "bench", "--url", transformers_serve.url, "--model", transformers_serve.model,
        "--server-metrics", transformers_serve.base + "/metrics", "-n", "1", "--no-store", "-q",
        "--out", str(tmp_path / "refused.json"), timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "--server-metrics" in done.stderr and "404" in done.stderr
    assert not (tmp_path / "refused.json").exists()


def test_model_list_shows_a_cache_and_the_given_model_is_used(
    transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    status, body = get(transformers_serve.url + "/models")
    assert status == 200
    listed = [m["id"] for m in json.loads(body)["data"]]
    assert listed == [DECOY_MODEL]  # the cache's model, not the one served
    result, records = bench(
        transformers_serve, tmp_path, "--model", transformers_serve.model,
        "-c", "1", "-n", "2", "--input-len", "8", "--output-len", "4",
    )  # fmt: skip
    assert_exact_counts(result, records, 2)
    assert result["conditions"]["model"] == transformers_serve.model
    assert result["conditions"]["served_models"] == [DECOY_MODEL]
    # The engine refuses any other model name with 400 and names the folder it serves.
    url = transformers_serve.url + "/chat/completions"
    status, body = post(url, chat(transformers_serve) | {"model": DECOY_MODEL})
    assert status == 400
    assert transformers_serve.model in json.loads(body)["detail"]


def test_without_model_the_run_fails_loudly_with_the_engines_reason(
    transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    """No --model: tokenpace takes the list's first name, as for any server. Here that is the cache's
    model, which the engine refuses: the run must not pass as a measurement, and it says why."""
    out = tmp_path / "r.json"
    done = procs.run_cli(
        "bench", "--url", transformers_serve.url, "-c", "1", "-n", "2", "--input-len", "8",
        "--output-len", "4", "--no-store", "-q", "--out", str(out), timeout=120,
    )  # fmt: skip
    assert done.returncode == NO_REQUEST_SUCCEEDED, done.stderr[-2000:]
    records = read_jsonl(out.parent / json.loads(out.read_text())["records"]["path"])
    assert all(r["status"] == "http_error" and "400" in r["error"] for r in records)
    assert all(transformers_serve.model in r["error"] for r in records)


@pytest.fixture
def gateway(transformers_serve: TransformersServe, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with gateway_in_front(transformers_serve.url, tmp_path) as running:
        yield running


def test_gateway_meters_streams_without_done_as_successes(
    gateway: tuple[str, Path], transformers_serve: TransformersServe, tmp_path: Path
) -> None:
    base, records_file = gateway
    out = tmp_path / "bench.json"
    run_cli(
        "bench", "--url", base + "/v1", "--model", transformers_serve.model, "-c", "2", "-n", "6",
        "--input-len", "24", "--output-len", "10", "--no-store", "-q", "--out", str(out),
    )  # fmt: skip
    result = json.loads(out.read_text())
    client = read_jsonl(out.parent / result["records"]["path"])
    assert [(r["status"], r["error"]) for r in client] == [("ok", None)] * 6
    assert result["summary"]["tokens"]["mismatched"] == 0
    wait_records(records_file, 6)
    seen = read_jsonl(records_file)
    assert len(seen) == 6
    for r in seen:
        assert r["status"] == "ok"
        assert r["finish_reason"] == "length"
        assert r["prompt_tokens"] == 24 + SALT_TOKENS + TEMPLATE_OVERHEAD
        assert r["output_tokens_server"] == r["output_tokens_counted"] == len(r["token_ns"]) == 10
