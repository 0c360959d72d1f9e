"""The sample outputs of README.md and docs/*.md have the shape of what the tool prints today.

README's samples are run here as written (against the built-in simulator); the playbook's come from
its own walkthrough run (tests/docs/test_playbook.py). A stale sample fails with the command that
refreshes it: scripts/doc_samples.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docs.doc_commands import DOCS
from docs.samples import COLUMNS, COMMANDS, ROOT, SAMPLES, documented, help_text, matches, shape

REFRESH = "run scripts/doc_samples.py to refresh it"
NOT_VALID = 3  # bench's exit when the client fell behind: a busy host, not a stale sample

PANEL = """\
╭──── tokenpace bench ────╮
│ model @ http://127.0.0.1:41281/v1  run 91a6b481acfe │
│ Latency (ms) │
│ ┏━━━━━━━┳━━━━━━━┳━━━━┓ │
│ ┃metric ┃   p50 ┃   n┃ │
│ ┡━━━━━━━╇━━━━━━━╇━━━━┩ │
│ │TTFT   │ 276.3 │  40│ │
│ │  ci95 │ [21.2, 279.9] │ │ │
│ │TPOT   │ ~8.4 │  40│ │
│ │  ci95 │ [8.1, │ │ │
│ │       │ 25.0] │ │ │
│ └───────┴───────┴────┘ │
│ Throughput  37.31 req/s | 596.9 output tok/s │
│             steady state 44.98 req/s │
│ Client      loop lag P50 0.0375 ms │
│ note: ~ marks a percentile with fewer than 5 samples beyond it │
╰─────────────────────────╯
"""


def test_every_sample_shown_is_known_and_every_known_sample_is_shown():
    shown = {(str(p.relative_to(ROOT)), name) for p in DOCS for name in documented(str(p.relative_to(ROOT)))}
    assert shown == {(s.doc, name) for name, s in SAMPLES.items()}


def test_the_shape_masks_figures_and_wrapping_but_not_rows_or_sections():
    other_figures = PANEL.replace("276.3", "1,353").replace("~8.4", "12.0").replace("41281", "5")
    assert matches(PANEL, other_figures, "dashboard")
    wrapped = "│ │  ci95 │ [8.1, │ │ │\n│ │       │ 25.0] │ │ │"
    unwrapped = PANEL.replace(wrapped, "│ │  ci95 │ [8.1, 25.0] │ │ │")
    assert matches(PANEL, unwrapped, "dashboard")
    no_ci95 = "".join(line for line in PANEL.splitlines(keepends=True) if "ci95" not in line)
    assert not matches(no_ci95, PANEL, "dashboard")  # the stale sample: no ci95 rows
    renamed = PANEL.replace("Throughput  ", "Rate        ")
    assert not matches(PANEL, renamed, "dashboard")
    assert shape(PANEL, "dashboard")[:2] == ["section Latency (ms)", "header metric"]


def test_lines_samples_may_be_trimmed_but_not_changed():
    out = "step 1 c=1: 13.3 req/s\nstep 2 c=2: 21.5 req/s\nKnee: 31.3 req/s\nsweep exit 0\n"
    assert matches(out.replace("13.3", "9.9"), out, "lines")
    assert matches("step 1 c=1: 13.3 req/s\n...\nKnee: 31.3 req/s\nsweep exit 0\n", out, "lines")
    assert not matches("step 1 c=1: 13.3 req/s\nKnee: 31.3 req/s\nsweep exit 0\n", out, "lines")
    assert not matches(out.replace("Knee", "Elbow"), out, "lines")


def run_sample(command: str, cwd: Path) -> tuple[int, str]:
    """``command`` in ``cwd`` with a throwaway store, at the samples' width; its output."""
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ) | {
        "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
        "COLUMNS": COLUMNS,
        "TOKENPACE_STORE": str(cwd / "runs.db"),
    }
    p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


RUNS = [name for name, s in SAMPLES.items() if s.command and s.kind != "help"]
HELPS = [name for name, s in SAMPLES.items() if s.kind == "help"]


def test_the_cli_reference_shows_every_command():
    import click

    from tokenpace.cli.main import cli

    def leaves(group: click.Group, path: str) -> list[str]:
        ctx = click.Context(group)
        found = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            full = f"{path} {name}".strip()
            found += leaves(command, full) if isinstance(command, click.Group) else [full]
        return found

    assert sorted(leaves(cli, "")) == sorted(COMMANDS), "samples.py COMMANDS is stale"


@pytest.mark.parametrize("name", HELPS)
def test_the_cli_reference_lists_the_flags_of_each_command(name: str):
    sample = SAMPLES[name]
    shown, printed = documented(sample.doc)[name], help_text(sample.command)
    assert matches(shown, printed, "help"), (
        f"{sample.doc}'s {sample.command} is stale ({REFRESH}):\n"
        f"shown: {shape(shown, 'help')}\nprinted: {shape(printed, 'help')}"
    )


@pytest.mark.parametrize("name", RUNS)
def test_a_run_of_the_documented_command_has_the_samples_shape(name: str, tmp_path: Path):
    sample = SAMPLES[name]
    shown = documented(sample.doc)[name]
    for attempt in range(3):
        rc, out = run_sample(sample.command, tmp_path / str(attempt))
        if rc != NOT_VALID:
            break
    else:
        pytest.skip(f"{sample.command!r} was NOT VALID three times: the host is too busy to print a sample")
    assert rc == 0, (sample.command, out[-3000:])
    assert matches(shown, out, sample.kind), (
        f"{sample.doc}'s sample {name} is stale ({REFRESH}):\n"
        f"shown: {shape(shown, sample.kind)}\nprinted: {shape(out, sample.kind)}"
    )


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
