"""`tokenpace ui`: the read-only web console over the run store."""

from __future__ import annotations

from pathlib import Path

import click

from tokenpace.app.baseline.store_ops import StoreError
from tokenpace.app.console.access import ConsoleRefused
from tokenpace.app.console.server import serve_console
from tokenpace.cli.library.store_opts import fail, store_option


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:8089", param_hint="--listen")
    return host.strip("[]"), int(port)


@click.command()
@store_option
@click.option(
    "--listen",
    default="127.0.0.1:8089",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to serve. Any address other than a loopback one needs --access-key-file.",
)
@click.option(
    "--access-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A file whose first line is the access key (16+ characters): browsers open the URL with "
    "?key=KEY once (a cookie keeps it); scripts send Authorization: Bearer KEY.",
)
def ui(store_url: str | None, listen: str, access_key_file: Path | None) -> None:
    """A read-only web console over the run store: runs, one run, compare, history; every page
    has a JSON twin under /api/ and a URL that can be shared."""
    host, port = _listen(listen)
    try:
        serve_console(store_url, host, port, access_key_file)
    except (ConsoleRefused, StoreError, ValueError) as exc:
        fail("ui", str(exc))
