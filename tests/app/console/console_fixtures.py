"""A small store for the console's tests: one test measured night after night (its P95 TTFT
shifts +30 % on the eighth night), a NOT VALID run, a baseline, a repeat group, a run of another
test, and a run whose labels and name are hostile (script tags, quotes, a 10 KB value)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from baseline_fixtures import make_record

from tokenpace.adapters.store import Store, connect
from tokenpace.core.metrics import summarize

HOSTILE = "<script>window.__pwned=1</script>\"'><img src=x onerror=window.__pwned=2>"
LONG = "x" * 10_240
CONDITIONS = {
    "model": "m", "endpoint": "http://127.0.0.1:9/v1", "api": "openai-chat",
    "load": {"mode": "closed_loop", "concurrency": 4, "requests": 120},
    "workload": {"input_len": {"spec": "128"}, "output_len": {"spec": "8"}},
}  # fmt: skip


def save(
    store: Store,
    run_id: str,
    day: int,
    ttft: float,
    rng: np.random.Generator,
    valid: bool = True,
    labels: dict[str, str] | None = None,
    concurrency: int = 4,
) -> None:
    started = f"2026-01-{day:02d}T00:00:00+00:00"
    load = CONDITIONS["load"] | {"concurrency": concurrency}  # type: ignore[operator]
    conditions = CONDITIONS | {"started_at": started, "load": load}
    records = [make_record(i, ttft * rng.lognormal(0, 0.05)) for i in range(120)]
    summary = summarize(records).to_dict()
    extra = {} if valid else {"invalid_reasons": ["the client fell behind its schedule"]}
    store.save_run(
        run_id, conditions, summary, records, labels=labels or {"test": "nightly"}, valid=valid, extra=extra
    )


def make_store(path: Path) -> Store:
    store = connect(f"sqlite:///{path}")
    rng = np.random.default_rng(7)
    for day in range(1, 15):
        ttft = 100.0 if day < 8 else 130.0
        save(store, f"night{day:02d}", day, ttft, rng, valid=day != 5)
    store.set_baseline("prod", "night03")
    save(store, "other01", 15, 50.0, rng, concurrency=16)
    for i in range(3):
        save(store, f"rep{i}", 16, 120.0, rng, labels={"test": "repeat"})
    store.save_repeat_group("grp1", ["rep0", "rep1", "rep2"], CONDITIONS, "m", [])
    save(store, "hostile" + HOSTILE[:20].replace("/", "_"), 17, 90.0, rng,
         labels={"test": HOSTILE, "note": LONG, HOSTILE: "key"})  # fmt: skip
    return store
