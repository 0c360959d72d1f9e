"""The noise between runs a gate uses, and the host conditions it was learned under. Pure.

A run stores its client host's condition (``host_class``: the load average per core over the run
and how long the client's loop stalled). Runs measured on a busy host move more between runs than
runs on a quiet one, so a quiet library is no evidence that tonight's busy runs are quiet: only
estimates learned under the current runs' conditions count. The value a gate uses is

    max(upper bound of the pooled estimate (``runnoise.upper_bound``), the current runs' own spread)

where the current runs are the sides' runs (each side with two or more runs shows its own spread).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tokenpace.core.analysis.evidence.runnoise import GroupNoise, RunNoise, pool, raw_pool, upper_bound

QUIET, BUSY = "quiet", "busy"
# A host whose load average per core reached this over a run shares its CPUs with other work:
# timers, schedulers and (on one machine) the engine itself run late now and then.
BUSY_LOAD_PER_CORE = 0.75
# The client's loop stalled this share of the run (health's own warning level): something else ran.
BUSY_STALL_SHARE = 0.01


def host_class(load_per_core: float | None, stall_share: float | None) -> str | None:
    """``busy`` or ``quiet``; None when neither reading was recorded (a run of an older version)."""
    if load_per_core is None and stall_share is None:
        return None
    if (load_per_core or 0.0) >= BUSY_LOAD_PER_CORE or (stall_share or 0.0) >= BUSY_STALL_SHARE:
        return BUSY
    return QUIET


def summary_host(summary: Mapping[str, Any]) -> str | None:
    """The host condition a stored run's summary recorded (its client's ``host`` entry)."""
    client = summary.get("client") or {}
    host = client.get("host")
    if not isinstance(host, Mapping):
        return None
    share = (client.get("stalls") or {}).get("share")
    return host_class(host.get("load_per_core"), share)


def current_host(classes: Iterable[str | None]) -> str | None:
    """The condition of a set of runs: busy if any was, quiet if all were, else not recorded."""
    seen = list(classes)
    if BUSY in seen:
        return BUSY
    return QUIET if seen and all(c == QUIET for c in seen) else None


def gate_noise(
    key: str,
    learned: Sequence[GroupNoise],
    current: Sequence[GroupNoise],
    host: str | None,
    pool_current: bool = True,
) -> RunNoise:
    """The noise for ``key``: ``learned`` estimates measured under ``host`` (all of them when
    ``host`` is None) pooled (with ``current``, the sides' own groups, when ``pool_current``), its
    upper bound, never below what ``current`` shows."""
    same = learned if host is None else [g for g in learned if g.host == host]
    elsewhere = [] if host is None else [g for g in learned if g.host != host]
    bounded = upper_bound(pool(key, [*same, *current] if pool_current else same))
    shown = raw_pool(key, current)
    used = max(bounded.rel_sd, shown or 0.0)
    return dataclasses.replace(
        bounded, rel_sd=used, current_sd=shown, elsewhere_sd=raw_pool(key, elsewhere), host=host
    )


def with_host(groups: Sequence[GroupNoise], host: str | None) -> list[GroupNoise]:
    """Estimates tagged with the host condition of the runs they came from."""
    return [dataclasses.replace(g, host=host) for g in groups]
