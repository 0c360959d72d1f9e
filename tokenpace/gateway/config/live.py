"""What may change in a running gateway, and how a change is described.

A reload (SIGHUP, ``POST /tokenpace/config``) builds a whole new ``GatewayConfig`` (checked as a
start would check it) and swaps it in; ``fixed_changes`` names the settings a running process
cannot take (the listening sockets, the records file, the workers, the keys...) so that such a
reload is refused as a whole, with the reason. ``describe`` is what a change records: per upstream
its arm and weight, then the SLOs, labels and mirrors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tokenpace.core.credentials import strip_credentials
from tokenpace.gateway.config.config import GatewayConfig

# Read per request (or per record, per scrape) from the current config: they change live.
LIVE_FIELDS = frozenset({
    "upstreams", "slo", "slo_objective", "static_labels", "mirrors",
    "connect_timeout_s", "first_token_timeout_s", "stall_timeout_s",
})  # fmt: skip
# A setting's configuration key (the flag's name), where it is not the field's name.
_KEYS = {
    "host": "listen", "port": "listen", "admin_host": "admin-listen", "admin_port": "admin-listen",
    "records_path": "records", "max_body_bytes": "max-body", "client_keys": "client-key",
    "admin_keys": "admin-key", "static_labels": "label", "mirrors": "mirror", "upstreams": "upstream",
    "event_names": "event", "events_per_client_s": "events-rate", "events_burst": "events-rate",
    "otlp_endpoint": "otlp-endpoint", "scrape_upstream_metrics": "scrape-upstream-metrics",
}  # fmt: skip
_SHOWN = ("slo", "slo_objective", "static_labels", "connect_timeout_s", "first_token_timeout_s",
          "stall_timeout_s")  # fmt: skip


def key_of(field: str) -> str:
    """The configuration key (flag name) a GatewayConfig field comes from."""
    return _KEYS.get(field, field.removesuffix("_s").replace("_", "-"))


def changed_fields(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    return [f.name for f in dataclasses.fields(GatewayConfig) if getattr(old, f.name) != getattr(new, f.name)]


def fixed_changes(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    """One line per setting that differs but cannot change in a running process (empty: all live)."""
    keys = dict.fromkeys(key_of(f) for f in changed_fields(old, new) if f not in LIVE_FIELDS)
    return [f"{key} cannot change while the gateway runs (restart it to change {key})" for key in keys]


def changed_keys(old: GatewayConfig, new: GatewayConfig) -> tuple[str, ...]:
    return tuple(dict.fromkeys(key_of(f) for f in changed_fields(old, new)))


def describe(config: GatewayConfig) -> dict[str, Any]:
    """The live settings as a change records them (no credential: URLs stripped, no keys)."""
    out: dict[str, Any] = {
        "split": [
            {
                "upstream": u.name,
                "arm": u.arm,
                "weight": u.weight,
                "url": strip_credentials(u.url),
                "ramp_s": u.ramp_s,
                "model": u.model,
            }
            for u in config.upstreams
        ],
        "mirrors": [
            {"name": m.name, "share": m.share, "url": strip_credentials(m.upstream.url)}
            for m in config.mirrors
        ],
    }
    for name in _SHOWN:
        value = getattr(config, name)
        out[key_of(name)] = value.to_dict() if hasattr(value, "to_dict") else value
    return out


def with_weights(config: GatewayConfig, weights: Mapping[str, float]) -> GatewayConfig:
    """The config with these arms' weights (an arm's upstreams share its weight in their current
    proportions, equally when all are at 0). ValueError: an unknown arm, a weight that is not a
    number >= 0, or every weight 0 (GatewayConfig's own check)."""
    arms = {u.arm for u in config.upstreams}
    for arm, w in weights.items():
        if arm not in arms:
            raise ValueError(f"weights: no arm {arm!r} in the split (arms: {', '.join(sorted(arms))})")
        if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w < float("inf"):
            raise ValueError(f"weights: {arm}'s weight must be a number >= 0")
    ups = []
    for u in config.upstreams:
        if u.arm not in weights:
            ups.append(u)
            continue
        mates = [m for m in config.upstreams if m.arm == u.arm]
        total = sum(m.weight for m in mates)
        part = u.weight / total if total > 0 else 1 / len(mates)
        ups.append(dataclasses.replace(u, weight=float(weights[u.arm]) * part))
    return dataclasses.replace(config, upstreams=tuple(ups))


@dataclasses.dataclass(frozen=True, slots=True)
class LiveChange:
    """A change applied: the stored event (its session filled in by the store writer) and the new
    config, which the writer needs for the runs of the new epoch. Queued with the records, in order."""

    event: Any  # core.events.ConfigChange
    config: GatewayConfig
    stored: bool = False  # a fleet's change: its row was stored as it was agreed, not by the writer


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeResult:
    """What a reload or a move did: applied (a new epoch), unchanged, or refused with every reason."""

    applied: bool
    epoch: int
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    current: dict[str, Any] = dataclasses.field(default_factory=dict)  # describe() of what runs now

    @property
    def refused(self) -> bool:
        return bool(self.errors)

    def line(self, who: str) -> str:
        """One log line."""
        if self.errors:
            return f"config change by {who} refused, epoch {self.epoch} stays: " + "; ".join(self.errors)
        if not self.applied:
            return f"config change by {who}: nothing changed (epoch {self.epoch})"
        return f"config change by {who} applied: epoch {self.epoch} ({', '.join(self.changed)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "epoch": self.epoch,
            "changed": list(self.changed),
            "errors": list(self.errors),
            "config": self.current,
        }
