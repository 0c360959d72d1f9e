"""Console view of ``tokenpace arms``: the sample-ratio check first, then the arms, the events, the
latency differences, the guard rails and the verdict line. Display only."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from tokenpace.app.rollout.terms import PROMOTE, ROLL_BACK, ArmsReport, Distribution, Share, ShareDiff
from tokenpace.cli.fit import show_table
from tokenpace.cli.library.analysis_view import COMPARISON_OPTIONAL, comparison_table, num, print_warnings

_VERDICT_STYLE = {PROMOTE: "bold green", ROLL_BACK: "bold red"}


def _share(s: Share) -> str:
    if s.value is None:
        return "-"
    ci = f" [{s.ci[0]:.1%}, {s.ci[1]:.1%}]" if s.ci else ""
    return f"{s.value:.1%}{ci}"


def _diff(d: ShareDiff) -> str:
    if d.diff is None:
        return "-"
    ci = f" [{d.ci[0] * 100:+.2f}, {d.ci[1] * 100:+.2f}]" if d.ci else ""
    return f"{d.diff * 100:+.2f}pp{ci}"


def _pctl(d: Distribution, name: str) -> str:
    value = d.percentile(name)
    if value is None:
        return "-"
    ci = d.ci95.get(name)
    if not ci:
        return f"{value:,.1f}"
    lo = "(unbounded" if math.isinf(ci[0]) else f"[{ci[0]:,.1f}"
    hi = "unbounded)" if math.isinf(ci[1]) else f"{ci[1]:,.1f}]"
    return f"{value:,.1f} {lo}, {hi}"


def srm_lines(report: ArmsReport) -> list[str]:
    if not report.srm:
        return ["sample ratio: not checked (no configured split, or one arm)"]
    out = []
    for r in report.srm:
        counts = ", ".join(f"{a} {r.observed[a]} (expected {r.expected[a]:,.1f})" for a in r.observed)
        state = "MISMATCH: the split is broken, every row below is suspect" if r.flagged else "ok"
        if not r.judged:
            state = "shown only: requests of one user are not independent; the users decide"
        out.append(f"sample ratio ({r.unit}): {counts}; chi2 {r.chi2:.2f}, p {r.p_value:.3g}: {state}")
    return out


def arms_table(report: ArmsReport) -> Table:
    t = Table(title="arms (latency in ms: P50, P95 with 95% intervals)")
    for col in ("arm", "weight", "requests", "users", "TTFT p50", "TTFT p95", "TPOT p95", "E2E p95"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    t.add_column("errors", justify="right")
    t.add_column("interrupted", justify="right")
    t.add_column("in flight p50/p90", justify="right")  # on its upstream when each was sent
    for a in report.arms:
        ref = " (ref)" if a.arm == report.reference else ""
        ref = " (candidate)" if a.arm == report.candidate else ref
        load = a.load
        inflight = f"{load.median:g} / {load.p90:g}" if load and load.median is not None else "-"
        t.add_row(
            a.arm + ref,
            num(a.weight, 3).rstrip("0").rstrip(".") if a.weight is not None else "-",
            str(a.requests),
            str(a.users),
            _pctl(a.latency["ttft"], "p50"),
            _pctl(a.latency["ttft"], "p95"),
            _pctl(a.latency["tpot"], "p95"),
            _pctl(a.latency["e2e"], "p95"),
            _share(a.errors),
            _share(a.interruptions),
            inflight,
        )
    return t


def events_table(report: ArmsReport) -> Table | None:
    names = sorted({n for a in report.arms for n in a.events})
    if not names:
        return None
    diffs = {d.arm: d for d in report.diffs}
    t = Table(title="business events (share of requests / of users with the event; B - A per user)")
    for col in ("event", "arm", "count", "per request", "per user", "per user vs ref"):
        t.add_column(col, justify="left" if col in ("event", "arm") else "right")
    for name in names:
        for a in report.arms:
            rates = a.events[name]
            d = diffs.get(a.arm)
            vs = _diff(d.events[name][1]) if d is not None and name in d.events else ""
            t.add_row(name, a.arm, str(rates.count), _share(rates.per_request), _share(rates.per_user), vs)
    return t


def guards_table(report: ArmsReport) -> Table | None:
    if not report.guards:
        return None
    t = Table(title=f"guard rails (against {report.reference})")
    for col in ("guard", "arm", "change", "95% interval", "outcome", "why"):
        t.add_column(col)
    for g in report.guards:
        rel = g.guard.relative
        fmt = (lambda v: f"{v:+.1%}") if rel else (lambda v: f"{v * 100:+.2f}pp")
        ci = f"[{fmt(g.ci[0])}, {fmt(g.ci[1])}]" if g.ci and None not in g.ci else "-"
        change = fmt(g.change) if g.change is not None else "-"
        t.add_row(g.guard.text, g.arm, change, ci, g.outcome, g.reason)
    return t


def load_lines(report: ArmsReport) -> list[tuple[str, str]]:
    """Each judged arm's load against the reference's, and whether latency could be matched on it."""
    out = []
    for d in report.diffs:
        if d.load is not None and d.load.state != "unchecked":  # unchecked: a warning says so
            style = "bold yellow" if d.load.state == "unmatched" else ""
            out.append((f"load at dispatch ({d.arm} against {report.reference}): {d.load.reason}", style))
    return out


def render(console: Console, report: ArmsReport, since: str) -> None:
    for line in srm_lines(report):  # first: a broken split voids every other row
        style = "bold red" if "MISMATCH" in line else ""
        console.print(line, style=style, highlight=False)
    for line, style in load_lines(report):  # next: arms at other loads void every latency row
        console.print(line, style=style, highlight=False)
    show_table(console, arms_table(report))
    for table in (events_table(report), guards_table(report)):
        if table is not None:
            show_table(console, table)
    for d in report.diffs:
        title = f"latency: {d.arm} (B) against {report.reference} (A)"
        show_table(console, comparison_table(d.latency, title), optional=COMPARISON_OPTIONAL)
    print_warnings(console, report.warnings)
    console.print(f"window: since {since}", highlight=False)


def verdict_line(report: ArmsReport) -> str:
    return f"VERDICT: {report.verdict.upper()}: {report.reason}"


def verdict_style(report: ArmsReport) -> str:
    return _VERDICT_STYLE.get(report.verdict, "bold yellow")
