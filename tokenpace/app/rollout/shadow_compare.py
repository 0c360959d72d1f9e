"""Use case: when one stored run holds the shadow copies of the other's requests (a gateway
session with ``--mirror``), compare them request by request as well (core/analysis/comparison/paired.py)."""

from __future__ import annotations

from tokenpace.adapters.store import RunInfo, Store
from tokenpace.core.analysis.comparison.paired import PairedComparison, is_shadow_of, paired_compare


def paired_if_shadow(store: Store, a: RunInfo, b: RunInfo, min_effect: float) -> PairedComparison | None:
    """B (or A) against the other on the same requests, positive when the shadow is slower; None
    when neither run is the other's shadow."""
    if "true" not in (a.labels.get("shadow"), b.labels.get("shadow")):
        return None
    live, shadow = (b, a) if a.labels.get("shadow") == "true" else (a, b)
    live_records, shadow_records = store.load_records(live.id), store.load_records(shadow.id)
    if not is_shadow_of(live_records, shadow_records):
        return None
    return paired_compare(live_records, shadow_records, min_effect)
