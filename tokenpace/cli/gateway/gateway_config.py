"""`tokenpace gateway --config FILE` and `--check-config FILE`: the configuration file as the flags'
defaults (flags given beside it override it), and its check: every problem, one line each, exit 2.
`reader`: the same file read again for a live reload (SIGHUP, POST /tokenpace/config), the flags
given on the command line still overriding it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from tokenpace.app.run.outputs import ExitStatus
from tokenpace.cli.parsing import duration_s
from tokenpace.cli.parsing import slo as parse_slo


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
        sys.exit(ExitStatus.REFUSED)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta[CONFIG_PATH] = value
    return value


CONFIG_PATH = "tokenpace.gateway.config_path"
_NOT_LIVE = (
    "store_url",
    "no_store",
    "emit_dir",
    "fleet",
    "replica",
    "spool_dir",
)  # not in GatewayConfig: checked here


def reader(
    ctx: click.Context,
    build: Callable[[dict[str, Any]], Any],
    parts: Callable[[dict[str, Any]], list[Callable[[], Any]]],
) -> Callable[[], Any] | None:
    """The configuration as the file now says it, under the flags the command line gave (None when
    the gateway started without --config). ``build``: the options -> a GatewayConfig; ``parts``:
    each value's own parse, so that a refused reload lists every problem, as --check-config does.
    Raises ValueError (a ConfigFileError with every problem of the file)."""
    path = ctx.meta.get(CONFIG_PATH)
    if not path:
        return None
    from tokenpace.app.serving.gateway_terms import ConfigFileError, read_config_file, to_defaults

    command, started = ctx.command, dict(ctx.params)
    given = {
        name: value
        for name, value in started.items()
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    # click's own defaults, as it hands them to the command (not the start's file: default_map)
    plain = dict(command.make_context(ctx.info_name, [], resilient_parsing=True).params)

    def load() -> Any:
        values = {**plain, **to_defaults(path, read_config_file(path), flags_of(command)), **given}
        problems = []
        for name in _NOT_LIVE:
            if values.get(name) != started.get(name):
                key = name.replace("_url", "").replace("_dir", "").replace("_", "-")
                problems.append(f"{key} cannot change while the gateway runs (restart it to change {key})")
        config, found = listed(parts(values), lambda: build(values))
        if problems or found:
            raise ConfigFileError(path, problems + found)
        return config

    return load


def listed(parts: list[Callable[[], Any]], build: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Every problem of the parts, then of the whole (gateway_terms.every_problem), click's
    refusals among them as plain lines."""
    from tokenpace.app.serving.gateway_terms import every_problem

    return every_problem(map(_plain, parts), _plain(build))


def _plain(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return fn()
        except click.ClickException as exc:
            raise ValueError(exc.message) from None

    return run


def check(path: str, build: Callable[[], Any], parts: list[Callable[[], Any]]) -> None:
    """Run every part's parse and then the whole config's; print each problem, exit 2, or say ok."""
    config, errors = listed(parts, build)
    for line in errors:
        click.echo(f"tokenpace gateway: {path}: {line}", err=True)
    if errors:
        sys.exit(ExitStatus.REFUSED)
    click.echo(f"{path}: ok ({len(config.upstreams)} upstream(s), listening on {config.host}:{config.port})")
    sys.exit(0)


def value_parts(o: dict[str, Any]) -> list[Any]:
    """Each value's own parse, as a start would: every problem of a file is listed, not the first."""
    from tokenpace.app.serving.gateway_terms import (  # deferred: the app loads only when used
        parse_listen,
        parse_mirror,
        parse_static_labels,
        parse_upstream,
    )

    durations = (
        "first_token_timeout", "stall_timeout", "connect_timeout", "scrape_interval", "scrape_window",
        "header_timeout", "body_timeout", "idle_timeout", "shutdown_timeout",
    )  # fmt: skip
    parts = [
        lambda: parse_slo(o["slo_text"]),
        lambda: parse_static_labels(o["labels"]),
        lambda: parse_listen(o["listen"], "--listen"),
        *(lambda u=u: parse_upstream(u) for u in o["upstreams"]),
        *(lambda m=m: parse_mirror(m) for m in o["mirrors"]),
        *(lambda d=d: duration_s(o[d], "--" + d.replace("_", "-")) for d in durations),
    ]
    if o["admin_listen"]:
        parts.append(lambda: parse_listen(o["admin_listen"], "--admin-listen"))
    return parts
