"""Gateway configuration: upstreams, SLOs, limits. Parsing raises ValueError with a message for users."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tokenpace.core.credentials import has_control, redact_userinfo
from tokenpace.core.metrics import Slo
from tokenpace.gateway.config.secrets import known_secrets, upstream_key
from tokenpace.gateway.config.static_labels import MAX_VALUE_CHARS, check_labels, parse_labels
from tokenpace.wire.endpoint import Endpoint, EndpointError, parse_endpoint
from tokenpace.wire.keepalive import GATEWAY_LOOK_S
from tokenpace.wire.pool import Pool

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_UPSTREAM_KEYS = (
    "weight", "model", "arm", "ramp", "version", "region", "metrics", "key_env", "key_file", "gpu_metrics",
)  # fmt: skip


def parse_duration_s(text: str) -> float:
    text = text.strip()
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * _DURATION_UNITS[unit]
    if text.replace(".", "", 1).isdigit():
        return float(text)
    raise ValueError(f"{text!r} is not a duration; use e.g. 500ms, 60s, 2m")


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    url: str  # base URL up to and including /v1 when the upstream has it, e.g. http://host:8000/v1
    weight: float = 1.0
    model: str | None = None  # serves only this model (requests for it go here first)
    arm: str = ""  # A/B arm label; defaults to the name
    ramp_s: float = 0.0  # weight grows linearly from 0 over this long after start (cold-start warm-up)
    labels: dict[str, str] = field(default_factory=dict)  # version, region: copied into records
    metrics_url: str | None = None  # the engine's own /metrics (default: beside the API root)
    gpu_metrics: str | None = None  # its GPUs: a dcgm-exporter's URL, or "nvidia-smi" (this host's)
    # From user:password in the URL (which is stripped from ``url``): sent as Authorization only
    # when the client sent none. Never shown.
    auth: str | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> Endpoint:
        """The wire's parse of the URL (host, port, TLS, Host header)."""
        return parse_endpoint(self.url)

    @property
    def origin(self) -> str:
        """scheme://host:port of the URL."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def base_path(self) -> str:
        """The URL's path without a trailing /v1 (requests keep their own /v1/... path)."""
        path = urlsplit(self.url).path.rstrip("/")
        return path[:-3] if path.endswith("/v1") else path


KEEPALIVE_S = 30.0  # an upstream connection idle longer is closed, not reused


def upstream_pool(endpoint: Endpoint) -> Pool:
    """The gateway's connections to one upstream (or mirror): a longer first look at its keep-alive
    than the client's, with requests dialling meanwhile (see tokenpace.wire.keepalive)."""
    return Pool(endpoint, max_idle_s=KEEPALIVE_S, look_s=GATEWAY_LOOK_S, wait_for_look=False)


def parse_upstream(text: str) -> Upstream:
    """``name=URL[,weight=W][,model=M][,arm=A][,ramp=60s][,version=V][,region=R][,key_env=VAR|key_file=PATH]``
    ``[,metrics=URL][,gpu_metrics=URL|nvidia-smi]``.

    Messages never echo a URL's ``user:password`` (shown as ``***@``)."""
    shown = redact_userinfo(text)
    if has_control(text):
        raise ValueError("an --upstream holds a control character (CR, LF, NUL, ...); refused, not shown")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or "=" not in parts[0]:
        raise ValueError(f"{shown!r}: expected name=URL[,weight=W][,model=M][,ramp=60s]")
    name, _, url = parts[0].partition("=")
    try:
        endpoint = parse_endpoint(url)  # the wire's one URL parser: credentials split off
    except EndpointError:
        raise ValueError(f"{name}=...: not an http(s) URL") from None  # it may hold credentials
    url, url_auth = endpoint.url, endpoint.auth
    kv: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or key not in _UPSTREAM_KEYS:
            options = ", ".join(k + "=" for k in _UPSTREAM_KEYS)
            raise ValueError(f"{redact_userinfo(part)!r}: upstream options are {options}")
        kv[key] = value
    try:
        weight = float(kv.get("weight", "1"))
    except ValueError:
        raise ValueError(f"{shown!r}: weight must be a number") from None
    if not 0 <= weight < float("inf"):
        raise ValueError(f"{shown!r}: weight must be a number >= 0")
    auth = upstream_key(kv, shown)
    if auth is not None and url_auth is not None:
        raise ValueError(f"{shown!r}: credentials in the URL and key_env=/key_file=: give one")
    auth = auth or url_auth
    ramp = parse_duration_s(kv["ramp"]) if "ramp" in kv else 0.0
    labels: dict[str, str] = {k: kv[k] for k in ("version", "region") if k in kv}
    metrics = kv.get("metrics")
    if metrics is not None and urlsplit(metrics).scheme not in ("http", "https"):
        raise ValueError(f"{shown!r}: metrics=... is not an http(s) URL")
    gpu = kv.get("gpu_metrics")
    if gpu is not None and gpu != "nvidia-smi" and urlsplit(gpu).scheme not in ("http", "https"):
        raise ValueError(f"{shown!r}: gpu_metrics=... is neither an http(s) URL nor nvidia-smi")
    return Upstream(
        name=name.strip(),
        url=url.rstrip("/"),
        weight=weight,
        model=kv.get("model"),
        arm=kv.get("arm", name.strip()),
        ramp_s=ramp,
        labels=labels,
        metrics_url=metrics,
        gpu_metrics=gpu,
        auth=auth,
    )


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    upstreams: tuple[Upstream, ...]
    host: str = "127.0.0.1"
    port: int = 9000
    slo: Slo = field(default_factory=Slo)
    slo_objective: float = 0.99  # share of requests that must meet each latency SLO (burn-rate alerts)
    max_body_bytes: int = 4 * 1024 * 1024
    connect_timeout_s: float = 10.0
    first_token_timeout_s: float = 300.0  # no first token (or full response) by then: timeout
    stall_timeout_s: float = 60.0  # no bytes for this long after the first: stall
    sticky_header: str = "x-user-id"  # sticky A/B key; the body's "user" field is the fallback
    records_path: str | None = None  # JSONL of request records
    # Records keep each prompt's length and prefix-block hashes (replayable); the text itself only
    # when the operator opts in (it is what users wrote: personal data, secrets).
    keep_prompts: bool = False
    record_queue: int = 10_000  # records waiting to be written; beyond it they are dropped and counted
    max_model_labels: int = 32  # distinct model label values before the rest become "other"
    client_keys: frozenset[str] = frozenset()  # gateway keys for clients; empty: no check
    scrape_upstream_metrics: bool = False  # scrape each upstream's /metrics: engine vs gateway TTFT
    scrape_interval_s: float = 5.0
    scrape_window_s: float = 60.0  # the decomposition covers the scrapes of this recent window
    otlp_endpoint: str | None = None  # OTLP/HTTP traces URL: a span per request (the otlp extra)
    # --label KEY=VALUE: on every series, record, stored run and span (static_labels.py: bounded)
    static_labels: dict[str, str] = field(default_factory=dict)
    # client-side defences (guard.py)
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0
    max_connections: int = 1024
    # /metrics and /tokenpace/* on their own address (None: the proxy's own port), behind keys
    admin_host: str | None = None
    admin_port: int | None = None
    admin_keys: frozenset[str] = frozenset()
    workers: int = 1  # gateway processes sharing the port (SO_REUSEPORT), see workers.py
    # shadow traffic (mirror.py): candidates that get a copy of live requests, never waited for
    mirrors: tuple[Any, ...] = ()  # mirror.Mirror
    mirror_queue: int = 256  # copies waiting, per gateway process; past it they are dropped, counted
    mirror_concurrency: int = 16  # copies in flight at once, per gateway process
    mirror_max_bytes: int = 64 * 1024 * 1024  # request bytes queued or in flight for all mirrors
    # bounds against hostile peers (docs/gateway-reference.md "Bounds")
    event_queue: int = 10_000  # outcome events waiting to be written (apart from the records)
    events_per_client_s: float = 200.0  # outcome events one client address may post per second
    events_burst: float = 2000.0  # ... at once (two full POSTs of 1000)
    event_names: frozenset[str] = frozenset()  # declared event names: always their own label
    shutdown_timeout_s: float = 10.0  # longest wait to write what is queued at exit

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every key and credential given, in the forms an upstream may echo: scrubbed by value."""
        return known_secrets(self.client_keys | self.admin_keys, (u.auth for u in self.upstreams))

    def __repr__(self) -> str:  # never show client keys
        return f"GatewayConfig(upstreams={[u.name for u in self.upstreams]}, port={self.port})"

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("at least one --upstream name=URL is needed")
        names = [u.name for u in self.upstreams]
        if "" in names:  # the empty name labels the requests no upstream was chosen for
            raise ValueError("an upstream needs a name: --upstream name=URL")
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must be unique: {names}")
        if not any(u.weight > 0 for u in self.upstreams):
            raise ValueError("every upstream's weight is 0: no request could be routed")
        if any(has_control(k) or " " in k for k in self.client_keys):
            raise ValueError("a client key holds a space or a control character; refused, not shown")
        for name in ("header_timeout_s", "body_timeout_s", "idle_timeout_s", "stall_timeout_s"):
            if not getattr(self, name) > 0:  # also refuses nan
                raise ValueError(f"--{name.removesuffix('_s').replace('_', '-')} must be more than 0")
        if not self.shutdown_timeout_s >= 0:
            raise ValueError("--shutdown-timeout must be 0 or more")
        if not (self.events_per_client_s > 0 and self.events_burst >= 1):
            raise ValueError("--events-rate must be more than 0")
        if self.max_connections < 1:
            raise ValueError("--max-connections must be at least 1")
        if self.workers < 1:
            raise ValueError("--workers must be at least 1")
        mirror_names = [m.name for m in self.mirrors]
        if len(set(mirror_names)) != len(mirror_names) or set(mirror_names) & set(names):
            raise ValueError(f"--mirror names must be unique and not an upstream's: {mirror_names}")
        if self.mirror_queue < 1 or self.mirror_concurrency < 1:
            raise ValueError("--mirror-queue and --mirror-concurrency must be at least 1")
        check_labels(self.static_labels)
        for up in (*self.upstreams, *(m.upstream for m in self.mirrors)):
            for key in up.labels.keys() & self.static_labels.keys():
                raise ValueError(f"--label {key}: also upstream {up.name}'s {key}=; give one of them")
        problems = _out_of_range(self)
        if problems:  # every one of them listed (--check-config, a refused reload)
            raise ConfigProblems(problems)
        if self.workers > 1 and self.scrape_upstream_metrics:
            raise ValueError(
                "--scrape-upstream-metrics works with one worker only (one scraper per upstream)"
            )


# The highest value each number setting takes (a flag's or a configuration file's): far above any
# deployment, far below what would fork, allocate or wait without end. ``slo-objective`` is a share.
LIMITS = {
    "max_body_bytes": ("max-body", 1 << 30),
    "max_connections": ("max-connections", 1_000_000),
    "workers": ("workers", 1024),
    "mirror_queue": ("mirror-queue", 1_000_000),
    "mirror_concurrency": ("mirror-concurrency", 4096),
    "events_per_client_s": ("events-rate", 1_000_000),
}


MAX_WEIGHT = 1_000_000  # weights are relative: any split fits, and their sum stays exact enough


class ConfigProblems(ValueError):
    """Several problems of one configuration, each its own line (``errors``)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


def _out_of_range(config: GatewayConfig) -> list[str]:
    """A line per number setting past its bound (LIMITS), or not finite; per upstream or mirror
    whose weight is past MAX_WEIGHT (their sum would lose the split) or whose name, arm or label
    is longer than a label value may be."""
    out = []
    for up in (*config.upstreams, *(m.upstream for m in config.mirrors)):
        who = f"upstream {up.name[:40]!r}"
        if not up.weight <= MAX_WEIGHT:
            out.append(f"{who}: weight must be at most {MAX_WEIGHT:,}, not {up.weight!r}")
        for what, value in (("name", up.name), ("arm", up.arm), *up.labels.items()):
            if len(value) > MAX_VALUE_CHARS:
                out.append(f"{who}: its {what} must be at most {MAX_VALUE_CHARS} characters (a label value)")
    if not 0 < config.slo_objective < 1:  # also refuses nan
        out.append(f"--slo-objective must be a share between 0 and 1, not {config.slo_objective!r}")
    for name, (flag, highest) in LIMITS.items():
        value = getattr(config, name)
        if not value <= highest:  # also refuses nan
            out.append(f"--{flag} must be at most {highest:,}, not {value!r}")
    if config.max_body_bytes < 1:
        out.append("--max-body must be at least 1")
    return out


def parse_static_labels(items: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` (repeatable): checked against static_labels.py's bounds (ValueError)."""
    return parse_labels(items)


def parse_listen(text: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def proxy_url(config: GatewayConfig, port: int) -> str:
    return f"http://{config.host}:{port}"


def admin_url(config: GatewayConfig, port: int, admin_port: int | None) -> str:
    """Where /metrics and /tokenpace/* are served: the proxy's own URL unless they are apart."""
    if admin_port is None:
        return proxy_url(config, port)
    return f"http://{config.admin_host or config.host}:{admin_port}"
