"""Use case: serve the measuring gateway from its config until stopped. The composition root of
`tokenpace gateway`: the OTLP extra checked, upstream /metrics probed, the run store opened (its
writer labels real-traffic runs with a session id), the event loop (uvloop when installed), and
what the operator is told, line by line, through ``say``."""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from tokenpace.adapters.store import Store
from tokenpace.app.baseline.run_store import open_for_run
from tokenpace.app.run.run_loop import run_event_loop
from tokenpace.app.watch.heap import freeze_startup_heap
from tokenpace.gateway.config.config import GatewayConfig
from tokenpace.gateway.config.static_labels import MAX_VALUE_CHARS
from tokenpace.gateway.lifecycle.fleet_sync import POLL_S, FleetLink, Follow
from tokenpace.gateway.recording.spool import Spool
from tokenpace.gateway.recording.spool_thread import SpoolThread
from tokenpace.wire.descriptors import reserve_descriptors

if TYPE_CHECKING:
    from tokenpace.gateway.lifecycle.serve import RunningGateway
    from tokenpace.gateway.lifecycle.workers import WorkerPool


MAX_REPLICA_CHARS = 253  # any Kubernetes pod's name


class GatewayRefused(Exception):
    """The gateway cannot serve as configured (said before it listens)."""


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def serve_gateway(
    config: GatewayConfig,
    labels: dict[str, str] | None = None,
    store_url: str | None = None,
    save: bool = True,
    say: Callable[[str], None] = _to_stderr,
    load: Callable[[], GatewayConfig] | None = None,
    config_path: str | None = None,
    terms: ReplicaTerms | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; queued records are flushed and the store closed before it
    returns. ``load``: the configuration file (``config_path``, watched for changes) read again, for
    SIGHUP and POST /tokenpace/config. ``terms``: its fleet and spool (ReplicaTerms).
    Raises GatewayRefused or ``run_store.RunStoreError`` before listening."""
    fleet, replica, spool_dir = terms or ReplicaTerms()
    check_otlp(config)
    check_fleet(config, fleet, save, replica)
    if config.scrape_upstream_metrics:
        for line in upstream_metrics_warnings(config):  # scraping goes on and picks engines up later
            say(line)
    from tokenpace.gateway.lifecycle.serve import RunningGateway as Running
    from tokenpace.gateway.lifecycle.serve import serve_forever

    store = open_for_run(store_url, save)
    session = uuid.uuid4().hex[:12]
    replica = replica or session
    writer = store_writer(store, config, session, {**(labels or {}), **fleet_labels(fleet, replica)})

    link = FleetLink(store, fleet, session, replica) if fleet and store is not None else None
    follow = Follow(config_path if load is not None and config.workers == 1 else None, link)
    spool = open_spool(spool_dir, config)

    def ready(gw: RunningGateway | WorkerPool) -> None:
        if writer is not None and isinstance(gw, Running):  # with workers: counted, not exported
            writer.on_unplaced = gw.gateway.metrics.unplaced.inc
        freeze_startup_heap()  # no full collection walks the start-up heap while serving
        reserve_descriptors(2 * config.max_connections + 64)  # client and upstream side of each
        names = ", ".join(f"{u.name} -> {u.url}" for u in config.upstreams)
        say(f"tokenpace gateway on {gw.url} ({names}); metrics at {gw.admin_url}/metrics")
        if load is not None and config.workers == 1:  # the file is applied live, not on restart only
            say(f"SIGHUP or POST {gw.admin_url}/tokenpace/config re-reads the --config file live")
        for m in config.mirrors:
            say(f"shadowing {m.share:.0%} of users to {m.name} -> {m.upstream.url} (measured, then dropped)")
        for line in following(follow, spool):
            say(line)
        if store is not None:
            for line in store_lines(store.display_url, session, config):
                say(line)

    def done(gw: Any) -> None:  # a RunningGateway, or with workers the WorkerPool
        sink = gw if config.workers > 1 else gw.gateway.sink  # with workers: what the parent wrote
        say(f"records: {sink.written} written, {sink.dropped} dropped")
        traces = getattr(getattr(gw, "gateway", None), "traces", None)
        if traces is not None:  # what a hanging collector did not take within --shutdown-timeout
            dropped = gw.gateway.spans_dropped
            say(f"spans: {traces.export.exported} exported, {dropped} dropped")
        if getattr(sink, "events_written", 0) or getattr(sink, "events_dropped", 0):
            say(f"outcome events: {sink.events_written} written, {sink.events_dropped} dropped")
        if spool is not None:
            close_spool(spool, say)
        if store is not None:
            store.close()

    from tokenpace.gateway.lifecycle.workers import serve_workers

    if config.workers == 1:
        main = serve_forever(
            config, ready, writer=writer, done=done, load=load, say=say, follow=follow, spool=spool
        )
    else:  # each worker process runs its loop as chosen here
        main = serve_workers(config, ready, writer=writer, done=done, run=run_event_loop)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            run_event_loop(main)
        except (OSError, RuntimeError) as exc:  # e.g. the port is taken: one line, exit 2
            raise GatewayRefused(f"cannot serve: {exc}") from None


def store_lines(display_url: str, session: str, config: GatewayConfig) -> list[str]:
    """Where the records go and the commands that read a mirror's records back."""
    lines = [f"storing records in {display_url} as session {session} ({compare_hint(config)})"]
    for m in config.mirrors:
        this = f"source=gateway,gateway_session={session}"
        live, shadow = f"{this},upstream={config.upstreams[0].name}", f"{this},upstream={m.name}"
        lines.append(f"live vs shadow on the same requests: tokenpace compare {live} {shadow}")
    return lines


def compare_hint(config: GatewayConfig) -> str:
    """The commands that read this session back, with the arm labels the store really holds."""
    arms = list(dict.fromkeys(u.arm for u in config.upstreams))
    if len(arms) < 2:
        return "tokenpace runs list --where source=gateway"
    return (
        f"tokenpace compare source=gateway,arm={arms[0]} source=gateway,arm={arms[1]}; "
        f"tokenpace arms --since 1h"
    )


def check_fleet(config: GatewayConfig, fleet: str | None, save: bool, replica: str | None = None) -> None:
    """A fleet shares its configuration and records through the store: it needs one, and one
    process per replica (run more replicas, not --workers)."""
    if not fleet:
        return
    if not save:
        raise GatewayRefused("--fleet shares the configuration through the store: drop --no-store")
    if config.workers > 1:
        raise GatewayRefused("--fleet runs one process per replica: drop --workers (run more replicas)")
    # label values, bounded: the fleet's on every /metrics sample, the replica's on its stored runs
    for flag, name, most in (
        ("--fleet", fleet, MAX_VALUE_CHARS),
        ("--replica", replica or "r", MAX_REPLICA_CHARS),
    ):
        if not 0 < len(name) <= most or not name.isprintable():
            raise GatewayRefused(f"{flag}: a printable name of 1 to {most} characters")


class ReplicaTerms(NamedTuple):
    """``fleet``: this gateway is one replica (``replica``) of the fleet of that name, its live
    configuration and records shared through the store (docs/gateway-fleet.md). ``spool_dir``:
    records kept on local disk until stored, so a kill loses none (gateway/recording/spool.py)."""

    fleet: str | None = None
    replica: str | None = None
    spool_dir: str | None = None


def fleet_labels(fleet: str | None, replica: str) -> dict[str, str]:
    return {"gateway_fleet": fleet, "gateway_replica": replica} if fleet else {}


def store_writer(store: Store | None, config: GatewayConfig, session: str, labels: dict[str, str]) -> Any:
    """The store's record writer (None without a store): one run per session, epoch and upstream."""
    if store is None:
        return None
    from tokenpace.gateway.recording.store_writer import StoreRecordWriter

    return StoreRecordWriter(store, config, session, labels)


def following(follow: Follow, spool: SpoolThread | None) -> list[str]:
    """What the gateway follows beside signals, and where its records wait, one line each."""
    out = []
    if follow.link is not None:
        fleet, replica = follow.link.fleet, follow.link.replica
        out.append(
            f"replica {replica} of fleet {fleet}: the fleet's configuration is polled every "
            f"{POLL_S:g} s from the store; its records are labelled gateway_fleet={fleet}"
        )
    if spool is not None:
        out.append(
            f"records spooled in {spool.folder} until stored ({spool.replayed} left by the last process)"
        )
    if follow.path is not None:
        out.append(f"watching {follow.path}: a change is applied as a reload (no signal needed)")
    return out


def close_spool(spool: SpoolThread, say: Callable[[str], None]) -> None:
    """The spool's queue drained and its files closed; what it could not keep, said."""
    spool.close()
    if spool.skipped or spool.unreadable or spool.left_unwritten:
        say(
            f"spool: {spool.skipped} records not spooled, {spool.unreadable} unreadable lines, "
            f"{spool.left_unwritten} still queued at exit"
        )


def open_spool(folder: str | None, config: GatewayConfig) -> SpoolThread | None:
    if not folder:
        return None
    if config.workers > 1:
        raise GatewayRefused("--spool works with one process (one spool per gateway): drop --workers")
    try:
        spool = Spool(folder)
    except OSError as exc:
        raise GatewayRefused(f"--spool {folder}: {exc.strerror or exc}") from None
    return SpoolThread(spool)


def check_otlp(config: GatewayConfig) -> None:
    """Fail now, with the install hint, rather than inside the server."""
    if not config.otlp_endpoint:
        return
    from tokenpace.gateway.observability.otlp import MissingExtra, Traces

    try:
        Traces(config.otlp_endpoint).close()
    except MissingExtra as exc:
        raise GatewayRefused(str(exc)) from None


def upstream_metrics_warnings(config: GatewayConfig) -> list[str]:
    """One line per upstream whose /metrics, or gpu_metrics= page, does not answer now."""
    from tokenpace.adapters.servermetrics import probe_gpu_url, probe_metrics_url
    from tokenpace.core.credentials import strip_credentials
    from tokenpace.gateway.observability.engine_watch import metrics_auth, metrics_url

    out = []
    for up in config.upstreams:
        url = metrics_url(up)
        problem = probe_metrics_url(url, timeout_s=2.0, auth=metrics_auth(up))
        if problem is not None:  # the URL may hold credentials: name the upstream only
            shown = strip_credentials(url)
            out.append(f"warning: upstream {up.name}'s /metrics{problem.removeprefix(shown)}")
        gpu = up.gpu_metrics
        if gpu and gpu != "nvidia-smi" and (problem := probe_gpu_url(gpu, timeout_s=2.0)) is not None:
            out.append(
                f"warning: upstream {up.name}'s gpu_metrics{problem.removeprefix(strip_credentials(gpu))}"
            )
    return out
