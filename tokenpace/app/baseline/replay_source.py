"""Where a replay's records come from: a records file (the gateway's ``--records`` JSONL, or a bench
run's records) read by ``adapters.datasets``, or the run store (``--trace store:REF``): one run by id,
baseline name or id prefix, or every run matching ``key=value[,...]`` (all the upstreams of one
gateway session: ``store:gateway_session=ID``), merged by arrival time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenpace.core.workload.replay import (
    MAX_TEMPLATE_TOKENS,
    ReplayTrace,
    only_api,
    parse_window,
    trace_from_records,
    window,
    without_template,
)

if TYPE_CHECKING:
    from tokenpace.app.run.workloads import WorkloadOptions

STORE_PREFIX = "store:"


def is_store_ref(trace: str) -> bool:
    return trace.startswith(STORE_PREFIX)


def read_store_trace(store_url: str | None, trace: str) -> ReplayTrace:
    """The records of the runs ``trace`` names, as a trace. ValueError (one line) when the store
    cannot be read or names no run with records."""
    from tokenpace.adapters.store import StoreError
    from tokenpace.adapters.store.query import parse_where
    from tokenpace.app.baseline.store_ops import open_store

    ref = trace[len(STORE_PREFIX) :].strip()
    try:
        store = open_store(store_url, existing=True)
        try:
            if "=" in ref:
                runs = store.list_runs(where=parse_where([p for p in ref.split(",") if p.strip()]))
                if not runs:
                    raise StoreError(f"no stored run matches {ref!r}")
            else:
                runs = [store.resolve(ref)]
            records: list[dict[str, Any]] = []
            for run in runs:
                records += [r.to_dict() for r in store.load_records(run.id)]
        finally:
            store.close()
    except StoreError as exc:
        raise ValueError(f"--trace {trace}: {exc}") from None
    try:
        replay = trace_from_records(records)
    except ValueError as exc:
        raise ValueError(f"--trace {trace}: {exc}") from None
    replay.description.update({"trace": trace, "runs": [run.id for run in runs]})
    return replay


def load_trace(
    opts: WorkloadOptions,
    trace: str,
    store_url: str | None,
    time_unit: str,
    block_tokens: int | None,
    seconds: Callable[[str], float],
    template_tokens: int | None = None,
) -> None:
    """Read ``--trace`` (a file or stored runs) into ``opts``, cut to ``opts.trace_window``; request
    records suggest their own block size unless ``block_tokens`` was given; ``template_tokens``
    (``--trace-template-tokens``) is taken off the prompts whose captured count held a template the
    records could not estimate. ValueError on bad input."""
    from tokenpace.adapters.datasets import read_trace

    if is_store_ref(trace):
        replay = read_store_trace(store_url, trace)
        opts.trace, opts.source = replay.rows, {**replay.description, "block_tokens": replay.block_tokens}
    else:
        opts.trace, opts.source = read_trace(Path(trace), time_unit)
    if template_tokens is not None:
        if not 0 <= template_tokens <= MAX_TEMPLATE_TOKENS:
            raise ValueError(f"--trace-template-tokens {template_tokens}: give 0 to {MAX_TEMPLATE_TOKENS}")
        flagged = sum(row.template_in_input for row in opts.trace)
        if not flagged:
            said = opts.source.get("template_tokens") or {"from": "not asked: not request records"}
            raise ValueError(
                f"--trace-template-tokens: no prompt of this trace needs it (its template: {said['from']})"
            )
        opts.trace = without_template(opts.trace, template_tokens)
        opts.source["template_tokens"] = {"tokens": template_tokens, "from": "given"}
        opts.source.get("filled", {}).pop("input_with_template", None)
    if block_tokens is None and "block_tokens" in opts.source:
        opts.block_tokens = int(opts.source["block_tokens"])
    opts.source["block_tokens"] = opts.block_tokens
    if opts.trace_window:
        start, end = parse_window(opts.trace_window, seconds)
        opts.trace = window(opts.trace, start, end)
        if not opts.trace:
            raise ValueError(f"--trace-window {opts.trace_window}: no request of the trace arrived in it")
        opts.source["window_s"] = [start, end]


def keep_api(opts: WorkloadOptions, api: str) -> None:
    """One run speaks one API: keep the trace's requests to ``api`` and say how many were left out."""
    rows, left_out = only_api(opts.trace or [], api)
    if not rows:
        held = ", ".join(f"{n} to {name}" for name, n in left_out.items())
        raise ValueError(f"--trace: no request of the trace was made to --api {api} (it holds {held})")
    if left_out:
        opts.trace = rows
        opts.source["left_out_other_api"] = left_out
