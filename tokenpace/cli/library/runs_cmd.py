"""`tokenpace runs list|show|label|delete|export|import`: the stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from tokenpace.app.baseline.store_ops import RunInfo, export_run, import_result, parse_where
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.store_opts import fail, guarded, open_or_fail, parse_when, store_option


@click.group()
def runs() -> None:
    """List, show, label, delete, export and import stored runs."""


def _num(summary: dict[str, Any], metric: str, stat: str = "p95") -> str:
    value = (summary.get(metric) or {}).get(stat)
    return "-" if value is None else f"{value:,.1f}"


def _lags(r: RunInfo) -> int | None:
    """For a gateway run whose summary covers fewer than its records (a live session's is refreshed
    once a minute): the records it covers; None otherwise (a bench's warm-up is never summarised)."""
    summarised = int((r.summary.get("counts") or {}).get("sent", 0))
    return summarised if r.kind == "gateway" and summarised < r.record_count else None


def _ok(r: RunInfo) -> str:
    """ok, of the requests summarised when that is fewer than the records: "17 of 20", never a
    bare 17 beside 615 records."""
    ok, lags = (r.summary.get("counts") or {}).get("ok"), _lags(r)
    return "-" if ok is None else f"{ok} of {lags}" if lags is not None else str(ok)


def _partial(r: RunInfo) -> str:
    lags = _lags(r)
    return "" if lags is None else f"summary of {lags} of {r.record_count} records (refreshed each minute)"


@runs.command("list")
@click.option("--where", "where", multiple=True, metavar="K=V", help="Label, model, endpoint or condition.")
@click.option("--since", help="Runs started since: 7d, 12h, 2024-05-01 ...")
@click.option("--until", help="Runs started until (same forms).")
@click.option("--limit", type=int, default=50, show_default=True, help="Show at most this many runs.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
@store_option
@guarded("runs list")
def list_runs(
    where: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    store_url: str | None,
) -> None:
    """Stored runs, newest first."""
    store = open_or_fail("runs list", store_url)
    found = store.list_runs(parse_where(where), parse_when(since), parse_when(until), limit, full=True)
    if as_json:
        for r in found:
            data = r.to_dict(full=False) | {"counts": r.summary.get("counts")}
            click.echo(orjson.dumps(data).decode())
        return
    table = Table(header_style="bold")
    notes = [
        " ".join(
            n
            for n in ("interrupted" if r.interrupted else "", "" if r.valid else "invalid", _partial(r))
            if n
        )
        for r in found
    ]
    columns = ["run", "started (UTC)", "model", "labels", "records", "ok", "TTFT p95 ms", "E2E p95 ms"]
    for col in columns + (["note"] if any(notes) else []):  # no empty column when no run has one
        table.add_column(col)
    for r, note in zip(found, notes, strict=True):
        table.add_row(
            r.id,
            r.started_at[:19].replace("T", " "),
            r.model or "-",
            ",".join(f"{k}={v}" for k, v in sorted(r.labels.items())),
            str(r.record_count),
            _ok(r),
            _num(r.summary, "ttft_ms"),
            _num(r.summary, "e2e_ms"),
            *([note] if any(notes) else []),
        )
    console = Console()
    show_table(console, table, optional=("labels", "started (UTC)", "model", "ok", "note"))
    console.print(f"{len(found)} run(s) in {store.display_url}", highlight=False)


@runs.command("show")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="The stored run as JSON (without records).")
@click.option(
    "--slowest", type=int, default=None, help="The N slowest traced requests, hop by hop (--traces)."
)
@click.option(
    "--traces",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Trace file for --slowest: JSON lines (OTLP JSON as the Collector's file exporter writes).",
)
@store_option
@guarded("runs show")
def show(ref: str, as_json: bool, slowest: int | None, traces: Path | None, store_url: str | None) -> None:
    """One run: conditions, labels, summary and its stored records by status."""
    store = open_or_fail("runs show", store_url)
    run = store.resolve(ref)
    if slowest is not None or traces is not None:
        if slowest is None or traces is None:
            raise ValueError("--slowest N and --traces FILE go together")
        from tokenpace.app.reports.trace_tail import follow_tail
        from tokenpace.cli.library.tail_view import show_tail

        show_tail(Console(), follow_tail(store.load_records(run.id), slowest, traces), traces)
        return
    counts = store.record_counts(run.id)
    if as_json:
        click.echo(orjson.dumps(run.to_dict() | {"stored_records": counts}, option=orjson.OPT_INDENT_2))
        return
    c = run.conditions
    load = c.get("load") or {}
    console = Console()
    console.print(f"[bold]run {run.id}[/]  {run.kind}, started {run.started_at}", highlight=False)
    console.print(f"model {run.model}  endpoint {run.endpoint}  api {c.get('api')}", highlight=False)
    console.print(f"load {_load_line(load)}; seed {c.get('seed', '-')}", highlight=False)
    labels = ", ".join(f"{k}={v}" for k, v in sorted(run.labels.items()))
    console.print(f"labels {labels or 'none'}", highlight=False)
    console.print(f"stored records {_counts_line(counts)}", highlight=False)
    if run.interrupted:
        console.print(f"[yellow]interrupted: {run.stop_reason}[/]", highlight=False)
    if not run.valid:
        why = "; ".join(run.extra.get("invalid_reasons") or []) or "the client did not keep up"
        console.print(f"[yellow]not valid: {why}[/]", highlight=False)
    table = Table(header_style="bold")
    for col in ("metric", "n", "p50", "p90", "p95", "p99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        d = run.summary.get(key) or {}
        table.add_row(
            key, str(d.get("n", 0)), *(_num(run.summary, key, p) for p in ("p50", "p90", "p95", "p99"))
        )
    show_table(console, table)
    s = run.summary
    console.print(
        f"throughput {s.get('request_throughput', 0):.2f} req/s, {s.get('output_token_throughput', 0):.1f} "
        f"output tok/s; error rate {s.get('error_rate', 0):.1%}",
        highlight=False,
    )


@runs.command("label")
@click.argument("ref")
@click.argument("labels", nargs=-1)
@click.option("--remove", "remove", multiple=True, metavar="KEY", help="Remove this label.")
@store_option
@guarded("runs label")
def label(ref: str, labels: tuple[str, ...], remove: tuple[str, ...], store_url: str | None) -> None:
    """Add or change labels (KEY=VALUE ...) on a run, or --remove KEY."""
    if not labels and not remove:
        fail("runs label", "give labels as KEY=VALUE or --remove KEY")
    store = open_or_fail("runs label", store_url)
    run = store.resolve(ref)
    if labels:
        store.set_labels(run.id, parse_where(labels))
    if remove:
        store.remove_labels(run.id, list(remove))
    after = store.get_run(run.id)
    click.echo(f"run {run.id} labels: {after.labels if after else {}}")


@runs.command("delete")
@click.argument("refs", nargs=-1, required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@store_option
@guarded("runs delete")
def delete(refs: tuple[str, ...], yes: bool, store_url: str | None) -> None:
    """Delete runs and their records."""
    store = open_or_fail("runs delete", store_url)
    found = [store.resolve(r) for r in refs]
    ids = ", ".join(r.id for r in found)
    if not yes and not click.confirm(f"delete {len(found)} run(s) ({ids}) and their records?"):
        fail("runs delete", "not confirmed; nothing deleted (pass --yes to skip the question)", 1)
    for r in found:
        store.delete_run(r.id)
        click.echo(f"deleted run {r.id} ({r.record_count} records)")


@runs.command("export")
@click.argument("ref")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Result JSON path (default RUNID.json); records go beside it as .records.jsonl.",
)
@store_option
@guarded("runs export")
def export(ref: str, out: Path | None, store_url: str | None) -> None:
    """Write a run as a result file and its records (the files `bench --out` writes)."""
    store = open_or_fail("runs export", store_url)
    run = store.resolve(ref)
    path, records_path, n = export_run(store, run, out or Path(f"{run.id}.json"))
    click.echo(f"exported run {run.id}: {path} ({n} records in {records_path})")


@runs.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@store_option
@guarded("runs import")
def import_(files: tuple[Path, ...], store_url: str | None) -> None:
    """Store result files written by `tokenpace bench --out` (e.g. after a run could not be stored)."""
    store = open_or_fail("runs import", store_url, writable=True)
    for f in files:
        info = import_result(store, f)
        click.echo(f"stored as run {info.id} ({info.record_count} records)")


def _load_line(load: dict[str, Any]) -> str:
    """``closed_loop, concurrency 16, 200 requests, 0 warm-up``: only the settings the run had."""
    named = (
        ("concurrency", "concurrency {}"),
        ("rate", "rate {}/s"),
        ("max_concurrency", "max concurrency {}"),
        ("requests", "{} requests"),
        ("duration_s", "{} s"),
        ("warmup", "{} warm-up"),
    )
    parts = [str(load.get("mode") or "-")]
    parts += [form.format(load[key]) for key, form in named if load.get(key) is not None]
    return ", ".join(parts)


def _counts_line(counts: dict[str, Any]) -> str:
    """``200 (ok 198, error 2)``."""
    total = counts.get("total", sum(v for k, v in counts.items() if k != "total"))
    rest = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "total" and v)
    return f"{total} ({rest})" if rest else str(total)
