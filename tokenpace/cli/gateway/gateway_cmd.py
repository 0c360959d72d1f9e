"""`tokenpace gateway`: options -> GatewayConfig -> app.gateway_serving (which composes and serves it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tokenpace.cli.gateway.gateway_config import CONFIG_PATH, check, load_config, reader, value_parts
from tokenpace.cli.parsing import die, duration_s
from tokenpace.cli.parsing import slo as parse_slo


@click.command()
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    is_eager=True,
    expose_value=False,
    callback=load_config,
    help="A TOML file saying what the flags say (deploy/gateway.toml); flags given beside it override it.",
)
@click.option(
    "--check-config",
    "check_config",
    default=None,
    metavar="FILE",
    is_eager=True,
    callback=load_config,
    help="Check a configuration file (every value, as a start would) and exit: 0 ok, 2 with one line "
    "per problem.",
)
@click.option("--listen", default="127.0.0.1:9000", show_default=True, help="HOST:PORT to serve on.")
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="name=URL[,weight=W][,model=M][,arm=A][,ramp=60s][,version=V][,region=R][,metrics=URL]",
    help="An OpenAI-compatible upstream (repeat for A/B). URL usually ends in /v1.",
)
@click.option(
    "--slo", "slo_text", default=None, help="e.g. ttft=800ms,tpot=50ms,e2e=10s: bucket bounds and alerts."
)
@click.option("--slo-objective", default=0.99, show_default=True, help="Share of requests meeting each SLO.")
@click.option("--records", "records_path", default=None, help="Also append request records here (JSONL).")
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help="Store real-traffic records as runs (one per upstream, labelled source=gateway) in this store: "
    "a SQLite path or URL, or postgresql://... (default: $TOKENPACE_STORE, else "
    "~/.local/share/tokenpace/runs.db).",
)
@click.option("--no-store", is_flag=True, help="Do not write records to the run store.")
@click.option(
    "--fleet",
    default=None,
    metavar="NAME",
    help="One replica of the fleet NAME: every replica on the same --store shares one live configuration "
    "(epoch) and labels its runs gateway_fleet=NAME (docs/gateway-fleet.md).",
)
@click.option("--replica", default=None, metavar="ID", help="This replica's name in its fleet (the pod's).")
@click.option(
    "--spool", "spool_dir", metavar="DIR", help="Keep records on disk here until stored: a kill loses none."
)
@click.option(
    "--mirror",
    "mirrors",
    multiple=True,
    metavar="NAME=URL[,share=P]",
    help="Shadow a candidate: a copy of each live request (or a share P of users, sticky) is sent to it, "
    "measured, recorded as shadow arm NAME and thrown away; the live path never waits for it.",
)
@click.option(
    "--mirror-queue", default=256, show_default=True, help="Shadow copies waiting; past it they are dropped."
)
@click.option("--mirror-concurrency", default=16, show_default=True, help="Shadow copies in flight at once.")
@click.option(
    "--keep-prompts",
    is_flag=True,
    help="Keep each prompt's text (up to 256 K characters) in the records, so a replay sends the real "
    "prompts. PRIVACY: the records then hold what users wrote. Default: only lengths and hashes.",
)
@click.option(
    "--client-key",
    "client_keys",
    multiple=True,
    metavar="KEY",
    help="Accept only clients sending Authorization: Bearer KEY (repeat; shows in ps: prefer the file).",
)
@click.option("--client-key-file", default=None, help="Gateway keys for clients, one per line.")
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="A static label (e.g. region=eu-west-1) on every /metrics series, record, stored run and span "
    "of this gateway (repeat; at most 8; values up to 128 printable characters).",
)
@click.option("--max-body", default=4 * 1024 * 1024, show_default=True, help="Largest request body, bytes.")
@click.option(
    "--first-token-timeout",
    default="300s",
    show_default=True,
    help="No first token (or whole response) by then: a timeout record.",
)
@click.option("--stall-timeout", default="60s", show_default=True, help="Longest gap between tokens.")
@click.option(
    "--connect-timeout",
    default="10s",
    show_default=True,
    help="Longest wait for a connection to an upstream.",
)
@click.option("--sticky-header", default="x-user-id", show_default=True, help="A/B stickiness key.")
@click.option(
    "--scrape-upstream-metrics",
    is_flag=True,
    help="Scrape each upstream's own /metrics (or its metrics=URL) and show engine TTFT beside gateway "
    "TTFT at /tokenpace/upstreams and as gauges.",
)
@click.option("--scrape-interval", default="5s", show_default=True, help="Upstream /metrics scrape interval.")
@click.option(
    "--scrape-window",
    default="60s",
    show_default=True,
    help="Recent window of the engine/gateway comparison.",
)
@click.option(
    "--otlp-endpoint",
    default=None,
    metavar="URL",
    help="Send a trace span per request (event at the first token) to this OTLP/HTTP traces URL, "
    "e.g. http://127.0.0.1:4318/v1/traces (needs the otlp extra).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    help="Gateway processes sharing the port (SO_REUSEPORT), e.g. one per core; metrics summed.",
)
@click.option("--header-timeout", default="10s", show_default=True, help="Longest wait for a request head.")
@click.option("--body-timeout", default="30s", show_default=True, help="Longest wait for a request body.")
@click.option("--idle-timeout", default="60s", show_default=True, help="Idle keep-alive connection lifetime.")
@click.option(
    "--max-connections",
    type=int,
    default=None,
    help="Open client connections; more get a 503 [default: 1024, lowered to fit ulimit -n].",
)
@click.option(
    "--admin-listen",
    default=None,
    metavar="HOST:PORT",
    help="Serve /metrics and /tokenpace/* here instead of on the proxy's port.",
)
@click.option(
    "--admin-key",
    "admin_keys",
    multiple=True,
    metavar="KEY",
    help="Require Bearer KEY on /metrics and /tokenpace/* (repeat).",
)
@click.option("--admin-key-file", default=None, help="Admin keys, one per line.")
@click.option(
    "--shutdown-timeout",
    default="10s",
    show_default=True,
    help="At SIGTERM: open requests get half of it, writing queued records the rest; then it exits.",
)
@click.option(
    "--event",
    "event_names",
    multiple=True,
    metavar="NAME",
    help="A declared outcome event name: always its own metric label (repeat; 'complaint' always is).",
)
@click.option(
    "--events-rate",
    default=200.0,
    show_default=True,
    help="Outcome events one client address may post per second (bursts of 10x); more get a 429.",
)
@click.option(
    "--emit-rules", "emit_dir", default=None, help="Write alert rules + Grafana JSON here and exit."
)
def gateway(
    listen: str,
    upstreams: tuple[str, ...],
    slo_text: str | None,
    slo_objective: float,
    records_path: str | None,
    store_url: str | None,
    no_store: bool,
    fleet: str | None,
    replica: str | None,
    spool_dir: str | None,
    mirrors: tuple[str, ...],
    mirror_queue: int,
    mirror_concurrency: int,
    keep_prompts: bool,
    labels: tuple[str, ...],
    client_keys: tuple[str, ...],
    client_key_file: str | None,
    max_body: int,
    first_token_timeout: str,
    stall_timeout: str,
    connect_timeout: str,
    sticky_header: str,
    scrape_upstream_metrics: bool,
    scrape_interval: str,
    scrape_window: str,
    otlp_endpoint: str | None,
    workers: int,
    header_timeout: str,
    body_timeout: str,
    idle_timeout: str,
    max_connections: int | None,
    admin_listen: str | None,
    admin_keys: tuple[str, ...],
    admin_key_file: str | None,
    shutdown_timeout: str,
    event_names: tuple[str, ...],
    events_rate: float,
    emit_dir: str | None,
    check_config: str | None,
) -> None:
    """A measuring pass-through proxy: /metrics for Prometheus, request records, A/B split."""
    from tokenpace.app.serving.gateway_terms import emit

    if check_config:
        _check(check_config, locals())
    slo = parse_slo(slo_text)
    static_labels = _static_labels(labels)
    if emit_dir:  # a dashboard variable per label key, to split P95 by it
        for path in emit(emit_dir, slo, slo_objective, tuple(static_labels)):
            click.echo(f"wrote {path}")
        return
    if records_path:
        from tokenpace.app.run.terms import check_output

        try:  # appending to a device or a pipe would hang or lose every record
            check_output(Path(records_path), "--records")
        except OSError as exc:
            die("gateway", str(exc))
    config = _config(locals(), slo)  # the options as click passed them
    if keep_prompts:
        _say(
            "warning: --keep-prompts: the records and the store will hold every prompt's text (what "
            "users wrote: personal data, secrets); keep them as you would the traffic itself"
        )
    from tokenpace.app.baseline.run_store import RunStoreError
    from tokenpace.app.serving.gateway_serving import GatewayRefused, ReplicaTerms, serve_gateway

    ctx = click.get_current_context()
    load = reader(ctx, lambda o: _from_values(o, config), value_parts)  # SIGHUP, the file watched
    try:  # the labels are the config's: on the records, the stored runs, /metrics and the spans
        terms = ReplicaTerms(fleet, replica, spool_dir)
        serve_gateway(config, None, store_url, not no_store, _say, load, ctx.meta.get(CONFIG_PATH), terms)
    except GatewayRefused as exc:
        die("gateway", str(exc))
    except RunStoreError as exc:
        die("gateway", str(exc))


def _check(path: str, o: dict[str, Any]) -> None:
    """--check-config: each value parsed as a start would, every problem said (gateway_config.check)."""
    from tokenpace.app.serving.gateway_terms import check_fleet_terms, parse_static_labels

    def build() -> Any:
        config = _build({**o, "static_labels": parse_static_labels(o["labels"])}, parse_slo(o["slo_text"]))
        check_fleet_terms(config, o["fleet"], not o["no_store"], o["replica"])  # as the start would
        return config

    check(path, build, value_parts(o))


def _config(o: dict[str, Any], slo: Any) -> Any:
    """The options as a GatewayConfig; one line and exit 2 on a bad value (never a credential)."""
    try:
        return _build(o, slo)
    except ValueError as exc:
        die("gateway", str(exc))


def _from_values(o: dict[str, Any], started: Any) -> Any:
    """A reload's options (the file's values under the command line's) -> a GatewayConfig. Where
    --max-connections was not given, the start's (fitted to ulimit -n before the start raised it)."""
    if o["max_connections"] is None:
        o = {**o, "max_connections": started.max_connections}
    return _build({**o, "static_labels": parse_static_labels_of(o["labels"])}, parse_slo(o["slo_text"]))


def parse_static_labels_of(items: tuple[str, ...]) -> dict[str, str]:
    from tokenpace.app.serving.gateway_terms import parse_static_labels

    return parse_static_labels(items)


def _build(o: dict[str, Any], slo: Any) -> Any:
    """The options as a GatewayConfig; ValueError (or click's BadParameter) on a bad value."""
    from tokenpace.app.serving.gateway_terms import (
        GatewayConfig,
        fit_to_open_files,
        parse_listen,
        parse_mirror,
        parse_upstream,
    )

    keys = _keys(o["client_keys"], o["client_key_file"], "--client-key-file")
    admin = _keys(o["admin_keys"], o["admin_key_file"], "--admin-key-file")
    max_connections = o["max_connections"]
    host, port = parse_listen(o["listen"], "--listen")
    admin_listen = o["admin_listen"]
    admin_host, admin_port = parse_listen(admin_listen, "--admin-listen") if admin_listen else (None, None)
    return GatewayConfig(
        upstreams=tuple(parse_upstream(u) for u in o["upstreams"]),
        host=host,
        port=port,
        slo=slo,
        slo_objective=o["slo_objective"],
        max_body_bytes=o["max_body"],
        connect_timeout_s=duration_s(o["connect_timeout"]),
        first_token_timeout_s=duration_s(o["first_token_timeout"]),
        stall_timeout_s=duration_s(o["stall_timeout"]),
        sticky_header=o["sticky_header"].lower(),
        records_path=o["records_path"],
        keep_prompts=o["keep_prompts"],
        client_keys=frozenset(keys),
        scrape_upstream_metrics=o["scrape_upstream_metrics"],
        scrape_interval_s=duration_s(o["scrape_interval"]),
        scrape_window_s=duration_s(o["scrape_window"]),
        otlp_endpoint=o["otlp_endpoint"],
        static_labels=o["static_labels"],
        header_timeout_s=duration_s(o["header_timeout"]),
        body_timeout_s=duration_s(o["body_timeout"]),
        idle_timeout_s=duration_s(o["idle_timeout"]),
        max_connections=max_connections if max_connections is not None else fit_to_open_files(1024),
        admin_host=admin_host,
        admin_port=admin_port,
        admin_keys=frozenset(admin),
        workers=o["workers"],
        mirrors=tuple(parse_mirror(m) for m in o["mirrors"]),
        mirror_queue=o["mirror_queue"],
        mirror_concurrency=o["mirror_concurrency"],
        shutdown_timeout_s=duration_s(o["shutdown_timeout"]),
        event_names=frozenset(o["event_names"]),
        events_per_client_s=o["events_rate"],
        events_burst=o["events_rate"] * 10,
    )


def _static_labels(items: tuple[str, ...]) -> dict[str, str]:
    from tokenpace.app.serving.gateway_terms import parse_static_labels

    try:
        return parse_static_labels(items)
    except ValueError as exc:
        die("gateway", str(exc))


def _say(line: str) -> None:
    click.echo(line, err=True)


def _keys(given: tuple[str, ...], path: str | None, flag: str) -> set[str]:
    from tokenpace.app.serving.gateway_terms import read_key_file

    keys = set(given)
    if path:
        try:
            keys.update(read_key_file(path))
        except OSError as exc:
            raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint=flag) from None
        except ValueError as exc:  # past the bound, or not UTF-8
            raise click.BadParameter(str(exc), param_hint=flag) from None
        if not keys:
            raise click.BadParameter(f"{path} holds no key", param_hint=flag)
    return keys
