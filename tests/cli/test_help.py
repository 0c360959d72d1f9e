"""Help and flag errors: every option explains itself, errors are one line naming the flag, and
`tokenpace --help` loads no command (so it is as quick as `tokenpace bench --help`)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from tokenpace.cli.main import COMMANDS, SUMMARIES, cli
from tokenpace.testing.procs import run_cli


def _options(cmd: click.Command, path: str, ctx: click.Context):
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            yield f"{path} {param.opts[0]}", param
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from _options(sub, f"{path} {name}", ctx)


def test_every_option_of_every_command_has_help_text() -> None:
    every = list(_options(cli, "tokenpace", click.Context(cli)))
    assert len(every) > 150  # the walk reached every subcommand
    assert [name for name, option in every if not (option.help or "").strip()] == []


def test_the_top_level_help_lists_every_command_in_one_line_each() -> None:
    assert list(SUMMARIES) == list(COMMANDS)
    r = run_cli("--help", env={"COLUMNS": "80"})
    assert r.returncode == 0
    for name, summary in SUMMARIES.items():
        assert f"  {name} " in r.stdout and len(f"  {name:<10}{summary}") <= 80, name


def test_top_level_help_imports_no_command_nor_its_heavy_libraries() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['tokenpace', '--help']\n"
        "from tokenpace.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('sqlalchemy', 'numpy', 'rich', 'tokenpace.cli.bench.bench_cmd', 'tokenpace.app',"
        " 'tokenpace.gateway')\n"
        "print(sorted({m for m in sys.modules if m.startswith(heavy)}), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "Commands:" in r.stdout
    assert r.stderr.strip() == "[]", r.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("bench", "--concurrency", "x"), "--concurrency"),
        (("bench", "--input-len", "abc"), "--input-len"),
        (("bench", "--no-such-flag"), "--no-such-flag"),
        (("compare", "onlyone"), "RUN_B"),
        (("sim", "--port", "70000"), "--port"),
    ],
)
def test_a_flag_error_is_one_line_that_names_the_flag(args: tuple[str, ...], flag: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in r.stderr, r.stderr
