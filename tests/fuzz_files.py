"""The hostile input files the fuzzers draw (hypothesis strategies): gateway configurations (TOML
of real and unknown keys, values of every kind, NaN and infinities, nesting past the bound, bytes
that are not UTF-8), profile edits and trace timestamps. Beside fuzz_strategies.py (hostile peers)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

# Gateway keys a reload may carry (the ones naming files, the store or the admin surface are fixed
# by the fuzzer's own head, so that the reload and --check-config read the same options).
GATEWAY_KEYS = (
    "slo", "slo-objective", "max-body", "mirror", "label", "first-token-timeout", "stall-timeout",
    "connect-timeout", "sticky-header", "keep-prompts", "client-key", "scrape-upstream-metrics",
    "scrape-interval", "workers", "header-timeout", "body-timeout", "idle-timeout",
    "shutdown-timeout", "event", "events-rate", "mirror-queue", "mirror-concurrency", "colour",
)  # fmt: skip
URLS = ("http://127.0.0.1:1/v1", "ftp://x/v1", "http://", "http://[::1", "", "http://h:99999/v1")


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (\\uXXXX escapes included)


scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.integers(20, 600).map(lambda digits: "1" + "0" * digits),  # past any float: compared, not converted
    st.sampled_from(["nan", "inf", "-inf", "1e308", "-0.0", "0.5", "true", "false"]),
    st.sampled_from(["10s", "0s", "-1s", "1e308s", "soon", "ttft=800ms", "ttft=nan", "a=b", ""]).map(
        _toml_string
    ),
    st.text(max_size=30).map(_toml_string),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: "[" + ", ".join(vs) + "]"),
        st.dictionaries(st.sampled_from(["a", "b", "name", "url"]), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=6,
)
upstreams = st.builds(
    lambda name, url, weight: (
        f'\n[[upstream]]\nname = {_toml_string(name)}\nurl = "{url}"\nweight = {weight}\n'
    ),
    st.sampled_from(["a", "b", "", "a,b", "x=y"]),
    st.sampled_from(URLS),
    st.sampled_from(["1", "0", "-1", "nan", "inf", '"ten"', "1e308"]),
)
deep = st.integers(33, 3000).map(lambda n: "deep = " + "[" * n + "]" * n + "\n")


@st.composite
def gateway_docs(draw: st.DrawFn) -> str:
    """The body of a configuration (after the fuzzer's fixed head): keys of the gateway and others,
    hostile values, upstream tables, sometimes nesting past the bound or a broken line; one in
    four a good file (a new SLO and split), which applies."""
    if draw(st.integers(0, 3)) == 0:
        weights = draw(st.tuples(st.integers(0, 100), st.integers(1, 100)))
        good = [
            f'\n[[upstream]]\nname = "{n}"\nurl = "http://127.0.0.1:1/v1"\nweight = {w}\n'
            for n, w in zip("ab", weights, strict=True)
        ]
        return f'slo = "ttft={draw(st.integers(1, 5000))}ms"\n' + "".join(good)
    keys = draw(st.lists(st.sampled_from(GATEWAY_KEYS), max_size=5, unique=True))
    lines = [f"{k} = {draw(values)}" for k in keys]
    if draw(st.booleans()):
        lines.append(draw(deep))
    if draw(st.integers(0, 9)) == 0:
        lines.append(draw(st.sampled_from(["x = [1", "= 3", "[[upstream", 'a = "\\q"'])))
    return "\n".join(lines) + "\n" + "".join(draw(st.lists(upstreams, min_size=0, max_size=3)))


# A profile field and a hostile value for it (TOML text), drawn over every section.
PROFILE_FIELDS = (
    "params_b", "layers", "hidden", "kv_heads", "head_dim", "weight_bytes", "kv_bytes", "experts",
    "top_k", "gpus", "mem_gb", "mem_bw_gbs", "tflops", "mfu", "mbu", "step_overhead_ms", "block_size",
    "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "eos_prob",
    "tokens_per_chunk", "step_cv", "prefill_table_tokens",
)  # fmt: skip
profile_edits = st.lists(st.tuples(st.sampled_from(PROFILE_FIELDS), values), min_size=1, max_size=4)
# A trace's timestamps (CSV text): finite, huge, not numbers, dates.
timestamps = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e308", "-1e308", "1e12", "nan", "inf", "2026-12-06T04:00:00Z", "soon", "1e-300"]),
    st.integers(-(10**20), 10**20).map(str),
    st.integers(20, 600).map(lambda digits: "1" + "0" * digits),
)
