"""A gateway's static labels (``--label region=eu-west-1``): what every series on /metrics, every
request record, every stored run and every span of this gateway carries, so P95 can be split by
region or zone across gateways. Bounded: at most ``MAX_LABELS`` labels, values of at most
``MAX_VALUE_CHARS`` printable characters, keys valid Prometheus label names that none of the
gateway's own labels use."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

MAX_LABELS = 8
MAX_VALUE_CHARS = 128
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The names the gateway's own series, records and stored runs use (a test checks every family of a
# scrape against it), and those Prometheus gives a meaning: a static label may take none of them.
RESERVED = frozenset(
    {
        "model", "upstream", "arm", "api", "outcome", "gen_ai_token_type", "reason", "event",
        "shadow", "mirror_of", "user", "client_request_id", "source", "gateway_session",
        "gateway_fleet", "gateway_replica",
        "le", "quantile", "job", "instance", "trace_id", "config_epoch",
    }
)  # fmt: skip


def check_label(key: str, value: str) -> None:
    """Raises ValueError with a one-line reason (the value is never echoed: it may be anything)."""
    if not _NAME.match(key) or key.startswith("__"):
        raise ValueError(f"--label {key!r}: a key must be a Prometheus label name ([A-Za-z_][A-Za-z0-9_]*)")
    if key in RESERVED:
        raise ValueError(f"--label {key}: the gateway's own label; choose another name")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"--label {key}: the value is not UTF-8") from None
    if not 0 < len(value) <= MAX_VALUE_CHARS or not value.isprintable():
        raise ValueError(
            f"--label {key}: the value must be 1 to {MAX_VALUE_CHARS} printable characters (no newline)"
        )


def check_labels(labels: Mapping[str, str]) -> None:
    if len(labels) > MAX_LABELS:
        raise ValueError(f"--label: at most {MAX_LABELS} labels (got {len(labels)})")
    for key, value in labels.items():
        check_label(key, value)


def parse_labels(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` items -> checked labels; raises ValueError (a key given twice too)."""
    out: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition("=")
        if not found:
            raise ValueError(f"--label {key[:40]!r}: expected KEY=VALUE")
        if key in out:
            raise ValueError(f"--label {key}: given twice")
        check_label(key, value)
        out[key] = value
    check_labels(out)
    return out


class ConstantLabels:
    """A ``Collector`` that adds the static labels to every sample of another one, at scrape time:
    one place, so every family has them, also those a later change adds (exemplars kept)."""

    def __init__(self, inner: Collector, labels: Mapping[str, str]) -> None:
        self.inner = inner
        self.labels = dict(labels)

    def collect(self) -> Iterator[Metric]:
        for family in self.inner.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            out.samples = [s._replace(labels={**self.labels, **s.labels}) for s in family.samples]
            yield out


def with_labels(collector: Collector, labels: Mapping[str, str]) -> Collector:
    return ConstantLabels(collector, labels) if labels else collector
