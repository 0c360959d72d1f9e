"""Server-side metrics: scraping an engine's Prometheus endpoint during a run, in its own process."""

from tokenpace.adapters.servermetrics.parse import parse_metrics
from tokenpace.adapters.servermetrics.process import ScraperProcess, probe_metrics_url

__all__ = ["ScraperProcess", "parse_metrics", "probe_metrics_url"]
