"""`tokenpace arms --since 1h --guard ttft.p95=+10%,error_rate=+0.5pp`: a gray release judged, and
with `--apply --gateway URL` the step it asks for made on the running gateway (`--set ARM=P%`: a
manual step)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console

from tokenpace.app.rollout.arms import ArmsQuery, arms_report, read_traffic
from tokenpace.app.rollout.terms import DEFAULT_LADDER, parse_guards, parse_ladder
from tokenpace.cli.gateway.arms_view import render, verdict_line, verdict_style
from tokenpace.cli.library.store_opts import (
    bootstrap_options,
    guarded,
    open_or_fail,
    parse_when,
    store_option,
    write_report,
)


@click.command()
@click.option(
    "--since", default="1h", show_default=True, help="Window start: 1h, 30m, 7d or 2026-12-01[T10:00]."
)
@click.option("--until", default=None, help="Window end (default: now).")
@click.option(
    "--guard", "guard", metavar="NAME=+X%|+Xpp,...", help="Guard rails, e.g. ttft.p95=+10%,complaint=+0pp."
)
@click.option(
    "--reference", metavar="ARM", help="The arm the others are judged against (default: the first)."
)
@click.option(
    "--baseline",
    metavar="ARM",
    help="A baseline arm: the old version on replicas of its own at the candidate's share. The "
    "candidate is judged against it, not production; --apply and --set move it with the candidate.",
)
@click.option("--session", metavar="ID", help="Only this gateway session (printed when the gateway starts).")
@click.option("--fleet", metavar="NAME", help="Only the replicas of this gateway fleet (all of them).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - confidence of the intervals.")
@bootstrap_options  # --resamples, --seed
@click.option("--json", "as_json", is_flag=True, help="The report as JSON on stdout.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="The report as JSON in FILE.")
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The arms over the whole window as one offline HTML file: share, load, latency, error and "
    "event rates per arm, each configuration change marked, each rollout step's verdict.",
)
@click.option(
    "--apply", is_flag=True, help="Move the running gateway's split as the verdict says (needs --gateway)."
)
@click.option(
    "--set",
    "set_share",
    metavar="ARM=P%",
    help="A manual step: ARM at P % of the running gateway's split, without judging (needs --gateway).",
)
@click.option(
    "--gateway", "gateway_url", metavar="URL", help="The gateway's admin surface, e.g. http://127.0.0.1:9100."
)
@click.option(
    "--ladder",
    default=",".join(f"{r:g}%" for r in DEFAULT_LADDER),
    show_default=True,
    help="The candidate's steps: a promote moves to the next one.",
)
@click.option(
    "--candidate",
    metavar="ARM",
    help="The one arm judged against --baseline, and the one --apply moves (default: every arm "
    "besides the reference is judged; --apply moves the only one).",
)
@click.option(
    "--admin-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The gateway's admin key (first line; default: $TOKENPACE_ADMIN_KEY).",
)
@click.option(
    "--changes", is_flag=True, help="List the gateway's configuration changes in the window, and exit."
)
@store_option
@guarded("arms")
def arms(
    since: str,
    until: str | None,
    guard: str | None,
    reference: str | None,
    baseline: str | None,
    session: str | None,
    fleet: str | None,
    alpha: float,
    resamples: int,
    seed: int,
    as_json: bool,
    out: Path | None,
    html_out: Path | None,
    apply: bool,
    set_share: str | None,
    gateway_url: str | None,
    ladder: str,
    candidate: str | None,
    admin_key_file: Path | None,
    changes: bool,
    store_url: str | None,
) -> None:
    """Per arm of the gateway's split: requests, users, latency, errors and business events, the
    sample-ratio check first, and one verdict. Exit 0 promote, 1 roll back, 5 hold (a broken split,
    too little traffic, a guard whose interval straddles its limit), 2 bad input (docs/exit-codes.md).
    With --apply the step is made (a hold moves nothing), with the same exit code."""
    if (apply or set_share) and not gateway_url:
        raise ValueError("--apply and --set need --gateway URL (the gateway's admin surface)")
    if baseline and reference and baseline != reference:
        raise ValueError("--baseline is the arm the candidate is judged against: give it or --reference")
    reference = baseline or reference
    key = admin_key(admin_key_file)
    if set_share:
        sys.exit(manual_step(gateway_url or "", key, set_share, baseline))
    rungs = parse_ladder(ladder)
    if changes:
        from tokenpace.app.rollout.arms import change_lines

        start = parse_when(since)
        assert start is not None
        lines = change_lines(open_or_fail("arms", store_url), start, parse_when(until), session)
        click.echo("\n".join(lines) if lines else "no configuration change in this window")
        sys.exit(0)
    guards = parse_guards(guard) if guard else []
    if not 0 < alpha < 1:
        raise ValueError("--alpha must be between 0 and 1")
    if resamples < 10:
        raise ValueError("--resamples must be at least 10")
    start = parse_when(since)
    assert start is not None
    store = open_or_fail("arms", store_url)
    query = ArmsQuery(
        start, parse_when(until), tuple(guards), reference, session, alpha, resamples, seed, fleet, candidate
    )
    traffic = read_traffic(store, query)  # once, for the report and --html's timeline
    _window, report = arms_report(store, query, traffic)
    if out:
        write_report(out, report.to_dict())
    if html_out:
        from tokenpace.app.rollout.arms_timeline import arms_over_time, write_arms_html

        write_arms_html(html_out, arms_over_time(store, query, traffic).to_dict())
        click.echo(f"wrote {html_out}", err=True)
    if as_json:
        click.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        console = Console()
        render(console, report, since)
        console.print(verdict_line(report), style=verdict_style(report), highlight=False)
    if apply:
        from tokenpace.app.rollout.apply import apply_verdict

        done = apply_verdict(
            report.verdict, report.reference, gateway_url or "", key, rungs, candidate, baseline
        )
        click.echo(move_line(done.move, done.epoch), err=as_json)
    sys.exit(report.exit_code)


def admin_key(path: Path | None) -> str | None:
    """The admin key: the file's first line, else $TOKENPACE_ADMIN_KEY (never a flag: ps shows it)."""
    if path is None:
        return os.environ.get("TOKENPACE_ADMIN_KEY") or None
    lines = [s for line in path.read_text(encoding="utf-8").splitlines() if (s := line.strip())]
    if not lines:
        raise ValueError(f"--admin-key-file {path}: holds no key")
    return lines[0]


def manual_step(gateway_url: str, key: str | None, text: str, baseline: str | None = None) -> int:
    from tokenpace.app.rollout.apply import set_share

    arm, sep, share = text.partition("=")
    try:
        percent = float(share.strip().removesuffix("%"))
    except ValueError:
        percent = float("nan")
    if not sep or not arm.strip() or not 0 <= percent <= 100:
        raise ValueError(f"--set {text!r}: expected ARM=P% with P from 0 to 100, e.g. b=25%")
    done = set_share(gateway_url, key, arm.strip(), percent, baseline)
    click.echo(move_line(done.move, done.epoch))
    return 0


def move_line(move: Any, epoch: int | None) -> str:
    after = ", ".join(f"{a}={w:g}" for a, w in move.after.items())
    if epoch is None:
        return f"nothing moved ({move.reason}); the split stays {after}"
    return f"applied: {move.reason}; the split is now {after} (gateway config epoch {epoch})"
