"""A fleet's desired configuration as the store holds it: the live settings (the split with its
weights and ramps, the SLOs, the labels, the mirrors, the timeouts), the weights set live, and the
hash of the configuration file they were last read from. Never a credential: an upstream's key
stays with each replica (from its own flags, file or Secret) and is used only for the upstream of
that name at the same URL.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

from tokenpace.core.credentials import strip_credentials
from tokenpace.core.metrics import Slo
from tokenpace.gateway.config.config import GatewayConfig, Upstream
from tokenpace.gateway.config.config_file import MAX_CONFIG_BYTES
from tokenpace.gateway.experiments.mirror import Mirror

DOC_VERSION = 1
_TIMEOUTS = ("connect_timeout_s", "first_token_timeout_s", "stall_timeout_s")


def file_hash(path: str | None) -> str | None:
    """The configuration file's SHA-256 (read within the file's own bound), None without a file."""
    if not path:
        return None
    with open(path, "rb") as fh:  # follows a symlink swapped as Kubernetes swaps a ConfigMap's
        return hashlib.sha256(fh.read(MAX_CONFIG_BYTES + 1)).hexdigest()


def file_key(path: str) -> tuple[int, int, int, int]:
    """What changes when the file (or the target of its symlinks) is replaced or written."""
    st = os.stat(path)
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _upstream(u: Upstream) -> dict[str, Any]:
    return {
        "name": u.name,
        "url": u.url,  # the credentials were split off when it was parsed
        "weight": u.weight,
        "model": u.model,
        "arm": u.arm,
        "ramp_s": u.ramp_s,
        "labels": dict(u.labels),
        "metrics_url": strip_credentials(u.metrics_url) if u.metrics_url else None,
        "gpu_metrics": strip_credentials(u.gpu_metrics) if u.gpu_metrics else None,
    }


def desired_of(config: GatewayConfig, weights_set_live: dict[str, float], sha: str | None) -> dict[str, Any]:
    """The document a fleet stores for ``config``."""
    return {
        "version": DOC_VERSION,
        "upstreams": [_upstream(u) for u in config.upstreams],
        "mirrors": [{**_upstream(m.upstream), "share": m.share} for m in config.mirrors],
        "slo": config.slo.to_dict(),
        "slo_objective": config.slo_objective,
        "static_labels": dict(config.static_labels),
        **{name: getattr(config, name) for name in _TIMEOUTS},
        "weights_set_live": dict(weights_set_live),
        "file_sha": sha,
    }


def config_from(local: GatewayConfig, doc: dict[str, Any]) -> GatewayConfig:
    """``local`` with the live settings of a stored document. ValueError: a document this version
    cannot read, or settings GatewayConfig refuses."""
    if doc.get("version") != DOC_VERSION:
        raise ValueError(f"the stored configuration has version {doc.get('version')!r}, not {DOC_VERSION}")
    known = {u.name: u for u in (*local.upstreams, *(m.upstream for m in local.mirrors))}
    try:
        ups = tuple(_parsed(d, known) for d in doc["upstreams"])
        mirrors = tuple(Mirror(_parsed(d, known), float(d["share"])) for d in doc["mirrors"])
        return dataclasses.replace(
            local,
            upstreams=ups,
            mirrors=mirrors,
            slo=Slo(**{k: float(v) for k, v in doc["slo"].items()}),
            slo_objective=float(doc["slo_objective"]),
            static_labels={str(k): str(v) for k, v in doc["static_labels"].items()},
            connect_timeout_s=float(doc["connect_timeout_s"]),
            first_token_timeout_s=float(doc["first_token_timeout_s"]),
            stall_timeout_s=float(doc["stall_timeout_s"]),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the stored configuration is malformed ({type(exc).__name__}: {exc})") from None


def _parsed(d: dict[str, Any], known: dict[str, Upstream]) -> Upstream:
    mine = known.get(d["name"])
    return Upstream(
        name=str(d["name"]),
        url=str(d["url"]),
        weight=float(d["weight"]),
        model=d["model"],
        arm=str(d["arm"]),
        ramp_s=float(d["ramp_s"]),
        labels={str(k): str(v) for k, v in d["labels"].items()},
        metrics_url=d["metrics_url"] or (mine.metrics_url if mine is not None else None),
        gpu_metrics=d.get("gpu_metrics") or (mine.gpu_metrics if mine is not None else None),
        auth=mine.auth if mine is not None and mine.url == d["url"] else None,
    )
