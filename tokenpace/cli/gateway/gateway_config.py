"""`tokenpace gateway --config FILE` and `--check-config FILE`: the configuration file as the flags'
defaults (flags given beside it override it), and its check: every problem, one line each, exit 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click


def flags_of(command: click.Command) -> dict[str, Any]:
    """The command's long flag names (without dashes) -> how each is taken (a Flag)."""
    from tokenpace.app.serving.gateway_terms import Flag

    out: dict[str, Any] = {}
    for p in command.params:
        if not isinstance(p, click.Option) or p.name in ("config_path", "check_config", "help"):
            continue
        kind: type = str
        if isinstance(p.type, click.types.IntParamType):
            kind = int
        elif isinstance(p.type, click.types.FloatParamType):
            kind = float
        for opt in p.opts:
            if opt.startswith("--"):
                out[opt[2:]] = Flag(
                    str(p.name), bool(p.multiple), bool(p.is_flag), bool if p.is_flag else kind
                )
    return out


def load_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager: the file's values become the flags' defaults before any flag is read."""
    if not value:
        return value
    from tokenpace.app.serving.gateway_terms import ConfigFileError, read_config_file, to_defaults

    try:
        defaults = to_defaults(value, read_config_file(value), flags_of(ctx.command))
    except ConfigFileError as exc:
        for line in exc.errors:
            click.echo(f"tokenpace gateway: {line}", err=True)
        sys.exit(2)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def check(path: str, build: Callable[[], Any], parts: list[Callable[[], Any]]) -> None:
    """Run every part's parse and then the whole config's; print each problem, exit 2, or say ok."""
    errors: list[str] = []
    for part in parts:
        try:
            part()
        except (ValueError, click.ClickException) as exc:
            errors.append(exc.message if isinstance(exc, click.ClickException) else str(exc))
    if not errors:
        try:
            config = build()
        except (ValueError, click.ClickException) as exc:
            errors.append(exc.message if isinstance(exc, click.ClickException) else str(exc))
    for line in errors:
        click.echo(f"tokenpace gateway: {path}: {line}", err=True)
    if errors:
        sys.exit(2)
    click.echo(f"{path}: ok ({len(config.upstreams)} upstream(s), listening on {config.host}:{config.port})")
    sys.exit(0)
