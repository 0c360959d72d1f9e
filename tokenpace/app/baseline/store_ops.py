"""Use cases of the run store: open it, save a bench result, import and export result files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenpace.adapters.results import RecordWriter, read_records, read_result, records_path_for, write_result
from tokenpace.adapters.store import (
    RunInfo,
    Store,
    StoreError,
    connect,
    default_store_url,
    normalize_url,
    parse_where,
    sqlite_path,
)
from tokenpace.app.baseline.compare import not_judgeable_reasons
from tokenpace.app.bench.bench import BenchResult
from tokenpace.core.analysis.comparison.stored_levels import run_levels

# What the commands use of the store: the protocol, its error, its run filter (KEY=VALUE), and these
# use cases. The CLI reaches the store through here, never adapters/ directly.
__all__ = [
    "RunInfo",
    "Store",
    "StoreError",
    "export_run",
    "import_result",
    "open_store",
    "parse_where",
    "save_result",
    "set_baseline",
    "write_json",
]


def write_json(path: Path, data: dict[str, Any]) -> None:
    """A report as JSON (``--json-out``-style files), written whole or not at all."""
    write_result(path, data)


def open_store(url: str | None = None, writable: bool = False, existing: bool = False) -> Store:
    """Open (and migrate) the store at ``url`` or the default; with ``writable``, prove a write works.
    With ``existing`` (commands that read or edit saved runs), a SQLite store that is not there is
    a StoreError ("no store at PATH") rather than a new empty one: reading creates nothing."""
    url = url or default_store_url()
    if existing:
        path = sqlite_path(normalize_url(url))
        if path is not None and not path.is_file():
            raise StoreError(f"no store at {path} (nothing saved there yet: see --store, $TOKENPACE_STORE)")
    store = connect(url)
    if writable:
        store.check_writable()
    return store


def save_result(store: Store, result: BenchResult, kind: str = "bench") -> int:
    """Store a finished (or interrupted) run with every record; returns the records stored."""
    data = result.to_dict()
    store.save_run(
        result.run_id,
        result.conditions,
        data["summary"],
        result.records,
        kind=kind,
        labels=result.conditions.get("labels") or {},
        interrupted=result.interrupted,
        valid=result.valid,
        stop_reason=result.stop_reason,
        extra={k: data[k] for k in ("warnings", "invalid_reasons", "tokenpace_version") if k in data},
    )
    store.save_levels(result.run_id, run_levels(result.records))
    return len(result.records)


def import_result(store: Store, path: Path, kind: str = "import") -> RunInfo:
    """Store a result file written by ``tokenpace bench --out`` (and its records beside it)."""
    try:
        data = read_result(path)
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the result file {path}: {exc}") from None
    if not isinstance(data, dict) or "run_id" not in data or "conditions" not in data:
        raise StoreError(f"{path} is not a tokenpace result file (no run_id or conditions)")
    ref = (data.get("records") or {}).get("path")
    records_path = path.parent / ref if ref else records_path_for(path)
    try:
        records = read_records(records_path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"cannot read the records file {records_path}: {exc}") from None
    expected = (data.get("records") or {}).get("count")
    if expected is not None and expected != len(records):
        raise StoreError(
            f"{records_path} holds {len(records)} records but the result says {expected}: not importing"
        )
    store.save_run(
        data["run_id"],
        data["conditions"],
        data.get("summary") or {},
        records,
        kind=kind,
        interrupted=bool(data.get("interrupted")),
        valid=bool(data.get("valid", True)),
        stop_reason=data.get("stop_reason"),
        extra={k: data[k] for k in ("warnings", "invalid_reasons", "tokenpace_version") if k in data},
    )
    store.save_levels(data["run_id"], run_levels(records))
    info = store.get_run(data["run_id"])
    assert info is not None
    return info


def export_run(store: Store, run: RunInfo, out: Path) -> tuple[Path, Path, int]:
    """Write the run as a result file plus ``.records.jsonl``, the format ``bench --out`` writes."""
    records = store.load_records(run.id)
    records_path = records_path_for(out)
    writer = RecordWriter(records_path)
    try:
        for r in records:
            writer.write(r)
    finally:
        writer.close()
    result: dict[str, Any] = {
        "tokenpace_version": run.extra.get("tokenpace_version", run.tool_version),
        "run_id": run.id,
        "kind": run.kind,
        "labels": run.labels,
        "valid": run.valid,
        "invalid_reasons": run.extra.get("invalid_reasons", []),
        "interrupted": run.interrupted,
        "stop_reason": run.stop_reason,
        "warnings": run.extra.get("warnings", []),
        "conditions": run.conditions,
        "summary": run.summary,
        "records": {"path": records_path.name, "format": "jsonl", "count": len(records)},
    }
    write_result(out, result)
    return out, records_path, len(records)


class BaselineRefused(ValueError):
    """The run named is NOT VALID or was interrupted: no gate should stand on it."""


def set_baseline(store: Store, name: str, ref: str, allow_invalid: bool = False) -> RunInfo:
    """Point baseline ``name`` at the run ``ref`` names; a run that cannot be judged is refused
    (BaselineRefused) unless ``allow_invalid``, or unless it is one of a repeat group that has a
    member that can (checks judge the group, its NOT VALID members left out)."""
    run = store.resolve(ref)
    reasons = not_judgeable_reasons(run)
    if reasons and not allow_invalid and not _group_stands(store, run.id):
        raise BaselineRefused(
            f"run {run.id} is NOT VALID ({'; '.join(reasons)}): a baseline every check is judged "
            "against must stand; rerun it, or pass --allow-invalid"
        )
    store.set_baseline(name, run.id)
    return run


def _group_stands(store: Store, run_id: str) -> bool:
    group = store.repeat_group_of(run_id)
    members = [store.get_run(i) for i in group[1]] if group is not None else []
    return any(m is not None and not not_judgeable_reasons(m) for m in members)
