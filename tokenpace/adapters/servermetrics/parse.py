"""Prometheus text format -> flat {series key: value}, the shape every scrape is saved in."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def series_key(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def parse_metrics(text: str) -> dict[str, float]:
    """Every sample of the exposition; raises ValueError when it is not Prometheus text."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[series_key(sample.name, sample.labels)] = float(sample.value)
    return out


def split_key(key: str) -> tuple[str, dict[str, str]]:
    """Inverse of series_key (label values here never contain '",')."""
    if "{" not in key:
        return key, {}
    name, _, rest = key.partition("{")
    labels = {}
    for part in rest.rstrip("}").split('",'):
        if not part:
            continue
        k, _, v = part.partition("=")
        labels[k] = v.strip('"')
    return name, labels
