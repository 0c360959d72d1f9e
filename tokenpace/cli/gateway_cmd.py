"""`tokenpace gateway`: options -> GatewayConfig -> app.gateway_serving (which composes and serves it)."""

from __future__ import annotations

from pathlib import Path

import click

from tokenpace.cli.parsing import die, duration_s
from tokenpace.cli.parsing import slo as parse_slo


@click.command()
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
    "--client-key",
    "client_keys",
    multiple=True,
    metavar="KEY",
    help="Accept only clients sending Authorization: Bearer KEY (repeat; shows in ps: prefer the file).",
)
@click.option("--client-key-file", default=None, help="Gateway keys for clients, one per line.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Extra label on the stored runs.")
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
    emit_dir: str | None,
) -> None:
    """A measuring pass-through proxy: /metrics for Prometheus, request records, A/B split."""
    from tokenpace.gateway.config import GatewayConfig, parse_upstream
    from tokenpace.gateway.emit import emit

    slo = parse_slo(slo_text)
    if emit_dir:
        for path in emit(emit_dir, slo, slo_objective):
            click.echo(f"wrote {path}")
        return
    if records_path:
        from tokenpace.adapters.safe_files import check_output

        try:  # appending to a device or a pipe would hang or lose every record
            check_output(Path(records_path), "--records")
        except OSError as exc:
            die("gateway", str(exc))
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter(f"{listen!r}: expected HOST:PORT", param_hint="--listen")
    keys = _client_keys(client_keys, client_key_file)
    try:
        config = GatewayConfig(
            upstreams=tuple(parse_upstream(u) for u in upstreams),
            host=host,
            port=int(port),
            slo=slo,
            slo_objective=slo_objective,
            max_body_bytes=max_body,
            connect_timeout_s=duration_s(connect_timeout),
            first_token_timeout_s=duration_s(first_token_timeout),
            stall_timeout_s=duration_s(stall_timeout),
            sticky_header=sticky_header.lower(),
            records_path=records_path,
            client_keys=keys,
            scrape_upstream_metrics=scrape_upstream_metrics,
            scrape_interval_s=duration_s(scrape_interval),
            scrape_window_s=duration_s(scrape_window),
            otlp_endpoint=otlp_endpoint,
        )
    except ValueError as exc:
        die("gateway", str(exc))  # one line, and never a credential (see gateway.config)
    from tokenpace.app.gateway_serving import GatewayRefused, serve_gateway
    from tokenpace.app.run_store import RunStoreError
    from tokenpace.cli.parsing import key_values

    extra_labels = key_values(labels, "=", "a label as KEY=VALUE")
    try:
        serve_gateway(config, extra_labels, store_url, not no_store, say=_say)
    except GatewayRefused as exc:
        raise click.UsageError(str(exc)) from None
    except RunStoreError as exc:
        click.echo(f"tokenpace gateway: error: {exc}", err=True)
        raise SystemExit(2) from None


def _say(line: str) -> None:
    click.echo(line, err=True)


def _client_keys(given: tuple[str, ...], key_file: str | None) -> frozenset[str]:
    from tokenpace.gateway.config import read_key_file

    keys = set(given)
    if key_file:
        try:
            keys.update(read_key_file(key_file))
        except OSError as exc:
            raise click.BadParameter(f"cannot read {key_file}: {exc.strerror}") from None
        if not keys:
            raise click.BadParameter(f"{key_file} holds no key", param_hint="--client-key-file")
    return frozenset(keys)
