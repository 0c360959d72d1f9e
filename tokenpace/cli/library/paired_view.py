"""The console table of a live-vs-shadow comparison on the same requests. Display only."""

from __future__ import annotations

from rich.table import Table

from tokenpace.app.baseline.terms import PairedComparison
from tokenpace.cli.library.analysis_view import num, pct

PAIRED_NOTE = (
    "Paired: each shadow copy answered its live request's own prompt, so lengths and prefixes cancel "
    "out; a verdict needs the whole 95% interval of the shadow/live ratio past the threshold."
)


def paired_table(p: PairedComparison) -> Table:
    failed = ", ".join(f"{n} {side} not ok" for side, n in p.failed.items() if n)
    title = (
        f"Paired on the same requests: {p.pairs} shadow copies"
        + (f" ({failed})" if failed else "")
        + (f"; {p.live_unmatched} live requests not mirrored" if p.live_unmatched else "")
    )
    t = Table(title=title, title_justify="left", header_style="bold")
    for name in ("metric", "pairs", "median B - A (ms)", "95% CI (ms)", "B / A", "95% CI", "verdict"):
        t.add_column(name, justify="left" if name in ("metric", "verdict") else "right")
    for m in p.metrics:
        ci_ms = f"[{num(m.diff_ci_ms[0], 1, True)}, {num(m.diff_ci_ms[1], 1, True)}]" if m.diff_ci_ms else "-"
        ratio = pct(m.median_ratio - 1) if m.median_ratio is not None else "-"
        ci = f"[{pct(m.ratio_ci[0] - 1)}, {pct(m.ratio_ci[1] - 1)}]" if m.ratio_ci else "-"
        t.add_row(
            m.metric.upper(), str(m.pairs), num(m.median_diff_ms, 1, True), ci_ms, ratio, ci,
            f"{m.verdict}: {m.why}" if m.why else m.verdict,
        )  # fmt: skip
    return t
