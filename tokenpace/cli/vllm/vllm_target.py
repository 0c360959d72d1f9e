"""`vllm bench serve`'s target, identity and HTTP flags on `tokenpace bench`, with vLLM's meaning:
where the requests go (--base-url/--host/--port/--endpoint/--backend), which model name is sent
(--served-model-name), the result label, headers and sampling, and the flags whose meaning tokenpace
cannot honour, refused by name with the reason. docs/vllm-reference.md lists every flag."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

# vLLM's --backend -> tokenpace's --api (the same request functions vLLM picks)
BACKENDS = {"vllm": "completions", "openai": "completions", "openai-chat": "chat"}
BACKENDS_REFUSED = {
    "openai-audio": "sends audio files to /v1/audio/transcriptions; tokenpace measures text generation",
    "openai-embeddings": "is vLLM's embeddings client; use tokenpace's --api embeddings",
}
# vLLM's --endpoint ends with the API's own path; what is before it is tokenpace's base URL
_API_PATHS = {"completions": "/completions", "chat": "/chat/completions"}
# flags that make a command line vLLM's: without --backend or --api it then sends vLLM's default API
VLLM_STYLE = ("base_url", "host", "port", "dataset_name")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

# A flag whose meaning tokenpace cannot honour: refused by name, with the reason (when given at all).
REFUSED = {
    "use_beam_search": "beam search is not part of the streaming OpenAI API that tokenpace measures",
    "profile": "drives vLLM's torch profiler (/start_profile); tokenpace measures from the client only",
    "lora_modules": "picks a LoRA adapter per request at random; run tokenpace once per adapter "
    "(--model NAME) and compare the runs",
    "random_batch_size": "batches several random prompts in one request (vLLM's embeddings client); "
    "tokenpace sends one prompt per request",
    "random_mm_base_items_per_request": "multimodal random prompts (images, video): tokenpace sends text",
    "random_mm_num_mm_items_range_ratio": "multimodal random prompts (images, video): tokenpace sends text",
    "random_mm_limit_mm_per_prompt": "multimodal random prompts (images, video): tokenpace sends text",
    "random_mm_bucket_config": "multimodal random prompts (images, video): tokenpace sends text",
    "hf_subset": "belongs to Hugging Face hub datasets, which tokenpace does not download",
    "hf_split": "belongs to Hugging Face hub datasets, which tokenpace does not download",
    "hf_name": "belongs to Hugging Face hub datasets, which tokenpace does not download",
    "hf_output_len": "belongs to Hugging Face hub datasets, which tokenpace does not download",
    "spec_bench_output_len": "belongs to the spec_bench dataset, which tokenpace does not read",
    "spec_bench_category": "belongs to the spec_bench dataset, which tokenpace does not read",
    "blazedit_min_distance": "belongs to the blazedit dataset (a Hugging Face hub download)",
    "blazedit_max_distance": "belongs to the blazedit dataset (a Hugging Face hub download)",
}
_FLAG_TYPES: dict[str, Any] = {
    "use_beam_search": None,
    "profile": None,
    "random_batch_size": int,
    "random_mm_num_mm_items_range_ratio": float,
    "random_mm_base_items_per_request": int,
    "spec_bench_output_len": int,
    "hf_output_len": int,
    "blazedit_min_distance": float,
    "blazedit_max_distance": float,
}
# vLLM flags that take several values (argparse nargs); click takes one per flag, so the values
# that follow such a flag are each given the flag again before click parses (expand_variadic).
VARIADIC = ("--goodput", "--metadata", "--header", "--lora-modules")


def _refused_option(key: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    flag = "--" + key.replace("_", "-")
    help_text = f"vLLM's flag, refused: {REFUSED[key]}."
    kind = _FLAG_TYPES.get(key, str)
    if kind is None:
        return click.option(flag, key, is_flag=True, default=None, hidden=True, help=help_text)
    multiple = key == "lora_modules"
    return click.option(flag, key, type=kind, multiple=multiple, hidden=True, help=help_text)


OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--base-url", help="vLLM: the server's base URL (no /v1); --endpoint is added to it."),
    click.option("--host", help=f"vLLM: the server's host (default {DEFAULT_HOST} when --port is given)."),
    click.option("--port", type=click.IntRange(1, 65535), help=f"vLLM: the server's port ({DEFAULT_PORT})."),
    click.option(
        "--endpoint",
        help="vLLM: the API path, e.g. /v1/completions (vLLM's default) or /v1/chat/completions.",
    ),
    click.option(
        "--backend",
        type=click.Choice([*BACKENDS, *BACKENDS_REFUSED]),
        help="vLLM: vllm/openai send /v1/completions, openai-chat /v1/chat/completions.",
    ),
    click.option("--endpoint-type", hidden=True, help="vLLM's old name of --backend."),
    click.option(
        "--served-model-name", help="vLLM: the model name sent in requests (--model then names the result)."
    ),
    click.option("--top-k", type=int, help="vLLM sampling: top_k sent with every request."),
    click.option("--min-p", type=float, help="vLLM sampling: min_p sent with every request."),
    click.option("--logprobs", type=int, help="vLLM: log-probabilities asked per token."),
    click.option(
        "--tokenizer-mode",
        hidden=True,
        help="vLLM: how its client loads the tokenizer; accepted, no effect here (docs/vllm-reference.md).",
    ),
    click.option(
        "--trust-remote-code",
        is_flag=True,
        hidden=True,
        help="vLLM: run a tokenizer's own code; accepted, no effect (tokenpace runs none).",
    ),
    click.option("--disable-tqdm", is_flag=True, help="vLLM's name of --quiet."),
    *[_refused_option(key) for key in REFUSED],
]


def expand_variadic(args: list[str]) -> list[str]:
    """``--metadata a=1 b=2`` (vLLM's argparse form) -> ``--metadata a=1 --metadata b=2``."""
    out: list[str] = []
    flag: str | None = None
    for arg in args:
        if arg.startswith("-") and not _is_number(arg):
            flag = arg if arg in VARIADIC else None
            out.append(arg)
        elif flag is not None and out[-1] != flag:
            out += [flag, arg]
        else:
            out.append(arg)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def refuse_unhonoured(o: dict[str, Any]) -> None:
    for key, reason in REFUSED.items():
        value = o.get(key)
        if value not in (None, False, ()):
            raise click.BadParameter(f"--{key.replace('_', '-')}: {reason}")
    if o.get("backend") in BACKENDS_REFUSED:
        raise click.BadParameter(f"--backend {o['backend']}: {BACKENDS_REFUSED[o['backend']]}")
    old = o.get("endpoint_type")
    if old is not None:
        if old in BACKENDS_REFUSED:
            raise click.BadParameter(f"--endpoint-type {old}: {BACKENDS_REFUSED[old]}")
        if old not in BACKENDS:
            raise click.BadParameter(f"--endpoint-type {old!r}: choose from {', '.join(BACKENDS)}")


def apply_target(o: dict[str, Any]) -> None:
    """--backend/--endpoint choose the API; --base-url or --host/--port the server (tokenpace's
    --url); without any of those three, tokenpace measures its simulator as always."""
    backend = o.get("backend") or o.get("endpoint_type")
    endpoint = o.get("endpoint")
    if backend or endpoint:
        api = BACKENDS.get(backend or "openai") or "completions"
        if not backend and endpoint and endpoint.rstrip("/").endswith("/chat/completions"):
            api = "chat"  # a bare --endpoint says which API it is
        _same_api(o, api, backend)
        o["api"] = api
    elif any(o.get(k) for k in VLLM_STYLE) and not _api_given():
        o["api"] = "completions"  # vLLM's default backend (openai: /v1/completions)
    prefix = "/v1"
    if endpoint:
        path = _API_PATHS[o["api"]]
        if not endpoint.rstrip("/").endswith(path):
            raise click.BadParameter(
                f"--endpoint {endpoint}: the {o['api']} API's path ends with {path} (--backend "
                f"{backend or 'openai'}); give e.g. /v1{path}"
            )
        prefix = endpoint.rstrip("/")[: -len(path)]
    server = _server(o)
    if server is not None:
        if o.get("url"):
            raise click.BadParameter("--url and --base-url/--host/--port name two targets: give one")
        o["url"] = server.rstrip("/") + prefix


def _api_given() -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source("api") is click.core.ParameterSource.COMMANDLINE


def _same_api(o: dict[str, Any], api: str, backend: str | None) -> None:
    if _api_given() and o["api"] != api:
        raise click.BadParameter(f"--api {o['api']} and --backend {backend} say different things: give one")


def _server(o: dict[str, Any]) -> str | None:
    if o.get("base_url"):
        if o.get("host") or o.get("port"):
            raise click.BadParameter("--base-url and --host/--port name two servers: give one")
        return str(o["base_url"])
    if o.get("host") or o.get("port"):
        host = o.get("host") or DEFAULT_HOST
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{host}:{o.get('port') or DEFAULT_PORT}"
    return None


def apply_identity(o: dict[str, Any]) -> dict[str, Any]:
    """--served-model-name is what is sent; --model then only names the result (vLLM's model_id).
    --label without '=' is vLLM's result label; --header KEY=VALUE is vLLM's header form."""
    model_id = o.get("model")
    if o.get("served_model_name"):
        o["model"] = o["served_model_name"]
    labels, vllm_label = [], None
    for item in o.get("labels") or ():
        if "=" in item:
            labels.append(item)
        elif vllm_label is None:
            vllm_label = item
        else:
            raise click.BadParameter("--label: give one result label (vLLM's) or labels as KEY=VALUE")
    o["labels"] = tuple(labels)
    o["headers"] = tuple(_header(h) for h in o.get("headers") or ())
    if o.get("disable_tqdm"):
        o["quiet"] = True
    notes = []
    tokenizer = o.get("tokenizer")
    if tokenizer and tokenizer != "server" and not Path(tokenizer).exists():  # a hub name, as vLLM's
        o["tokenizer"] = None
        notes.append(
            f"--tokenizer {tokenizer}: not a local file or folder; tokenpace downloads nothing, so it "
            "makes prompts by its word estimate and takes token counts from the server (recorded as "
            "tokenizer_id)"
        )
    return {"label": vllm_label, "model_id": model_id, "tokenizer_id": tokenizer, "notes": notes}


def _header(item: str) -> str:
    colon, equals = item.find(":"), item.find("=")
    if equals > 0 and (colon < 0 or equals < colon):  # vLLM's KEY=VALUE
        return item[:equals] + ":" + item[equals + 1 :]
    return item


def sampling_body(o: dict[str, Any]) -> dict[str, Any]:
    """vLLM's sampling flags tokenpace has no own flag for, sent in every request body."""
    body: dict[str, Any] = {}
    if o.get("top_k") is not None:
        body["top_k"] = o["top_k"]
    if o.get("min_p") is not None:
        body["min_p"] = o["min_p"]
    if o.get("logprobs") is not None:
        if o.get("api") == "chat":
            body.update(logprobs=True, top_logprobs=o["logprobs"])
        else:
            body["logprobs"] = o["logprobs"]
    return body
