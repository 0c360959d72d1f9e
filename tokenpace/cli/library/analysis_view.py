"""Console tables for comparisons, gates and histories (rich). Display only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from tokenpace.app.baseline.terms import (
    ASSUMED_CENTRE_SD,
    ASSUMED_TAIL_SD,
    Comparison,
    GateItem,
    RunNoise,
    Verdict,
)

_STYLE = {
    Verdict.SLOWER: "bold red",
    Verdict.FASTER: "bold green",
    Verdict.UNDECIDED: "yellow",
    Verdict.NEGLIGIBLE: "dim",
    Verdict.TOO_FEW: "yellow",
}


def num(v: float | None, digits: int = 2, signed: bool = False) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "unbounded"  # a side the runs cannot bound
    return f"{v:+,.{digits}f}" if signed else f"{v:,.{digits}f}"


def pct(v: float | None, signed: bool = True) -> str:
    if v is not None and math.isinf(v):
        return "unbounded"  # a side the runs cannot bound
    return "-" if v is None else (f"{v:+.1%}" if signed else f"{v:.1%}")


def pvalue(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.2g}" if p >= 0.001 else "<0.001"


# Columns a narrow terminal may leave out of the comparison table (the verdict and numbers stay).
COMPARISON_OPTIONAL = ("B - A", "p", "detectable")


def comparison_table(c: Comparison, title: str, caption: str | None = None) -> Table:
    conf = f"{100 * (1 - c.alpha):g}% CI"
    t = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in (
        ("metric", "left"),
        ("", "left"),
        ("A", "right"),
        ("B", "right"),
        ("B - A", "right"),
        (conf, "right"),
        ("change", "right"),
        ("change CI", "right"),
        ("detectable", "right"),
        ("p", "right"),
        ("verdict", "left"),
    ):
        t.add_column(name, justify=justify, no_wrap=name == "verdict")  # type: ignore[arg-type]
    for m in c.metrics:
        first = True
        for r in m.rows:
            ci = f"[{num(r.ci[0], signed=True)}, {num(r.ci[1], signed=True)}]" if r.ci else "-"
            t.add_row(
                f"{m.title} ({m.unit})" if first else "",
                r.percentile.upper(),
                num(r.a),
                num(r.b),
                num(r.diff, signed=True),
                ci,
                pct(r.rel),
                _rel_ci(r.rel_ci),
                pct(r.detectable, signed=False) if r.detectable is not None else "-",
                pvalue(r.p_value),
                f"[{_STYLE[r.verdict]}]{r.verdict.value}[/]" if _STYLE[r.verdict] else r.verdict.value,
            )
            first = False
        t.add_row(
            "",
            "all",
            _n(m.n_a, m.n_eff_a),
            _n(m.n_b, m.n_eff_b),
            "",
            "",
            "",
            "",
            "",
            pvalue(m.rank_p),
            f"[{_STYLE[m.verdict]}]{m.verdict.value}[/]" if _STYLE[m.verdict] else m.verdict.value,
            end_section=True,
        )
    t.caption = caption or (
        "CI and change CI count the noise between requests and between runs; detectable: the "
        "smallest worsening called 9 times in 10 at this size and noise; 'all': Mann-Whitney rank "
        "test within runs (shown, not used); eff: what the requests are worth as independent ones "
        "where neighbours in time moved together (the intervals are drawn in blocks of time)"
    )
    return t


def _rel_ci(ci: tuple[float | None, float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "-"
    return f"[{pct(ci[0])}, {pct(ci[1])}]"


def undecided_line(c: Comparison) -> str | None:
    """What would decide the undecided rows: runs a side, from the noise they showed, or what the
    requests' moving together asks for (the row's dependence note)."""
    parts = []
    for m in c.metrics:
        for r in m.rows:
            if r.verdict is Verdict.UNDECIDED:
                need = f"about {r.runs_needed} runs a side" if r.runs_needed else "too close to call"
                need = r.dependence_note or need
                parts.append(f"{m.metric}.{r.percentile} ({need})")
    if not parts:
        return None
    return "undecided: " + ", ".join(parts) + " (bench --repeat K measures K runs a side)"


def noise_lines(c: Comparison, keys: Sequence[str] | None = None) -> list[str]:
    """The noise between runs that the intervals count: learned ones one a line, assumed ones in one."""
    seen: dict[str, RunNoise] = {}
    for m in c.metrics:
        for r in m.rows:
            if r.noise is not None and (keys is None or r.noise.key in keys):
                seen.setdefault(r.noise.key, r.noise)
    out = [f"runs: A {c.runs_a}, B {c.runs_b}"]
    out += [f"run noise {k}: {n.describe()}" for k, n in seen.items() if not n.assumed]
    assumed = [k for k, n in seen.items() if n.assumed]
    if assumed:
        out.append(
            f"run noise {', '.join(assumed)}: assumed {ASSUMED_CENTRE_SD:.0%} up to P50, "
            f"{ASSUMED_TAIL_SD:.0%} above (no repeated runs under these conditions)"
        )
    out += [f"run noise {k}: {note}" for k, n in seen.items() if n.assumed for note in n.notes()]
    return out


def run_level_table(rows: Sequence[dict[str, Any]]) -> Table:
    t = Table(title="Whole-run numbers (one value per run: no interval)", title_justify="left")
    for name in ("", "A", "B", "change"):
        t.add_column(name, justify="left" if not name else "right")
    for r in rows:
        t.add_row(r["title"], num(r["a"]), num(r["b"]), pct(r["rel"]))
    return t


def gate_table(items: Sequence[GateItem]) -> Table:
    t = Table(title="Release gate", title_justify="left", header_style="bold")
    for name in ("check", "allowed", "baseline", "candidate", "change", "detectable", "outcome", "why"):
        t.add_column(
            name, justify="right" if name in ("baseline", "candidate", "change", "detectable") else "left"
        )
    style = {"pass": "green", "regressed": "bold red", "undecided": "yellow"}
    for i in items:
        t.add_row(
            i.threshold.name,
            f"+{i.threshold.limit:.0%}",
            num(i.baseline),
            num(i.candidate),
            pct(i.rel),
            pct(i.detectable, signed=False) if i.detectable is not None else "-",
            f"[{style[i.outcome]}]{i.outcome}[/]",
            i.reason,
        )
    return t


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def print_rule(console: Console, rule: str) -> None:
    console.print(f"[dim]Decision rule: {rule}[/]", highlight=False)


def _n(n: int, n_eff: float | None) -> str:
    """The count, and what it is worth where requests moved together."""
    if n_eff is None or n_eff >= n:
        return f"n={n}"
    return f"n={n} (eff {n_eff:.0f})"
