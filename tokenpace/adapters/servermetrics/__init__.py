"""Server-side metrics: scraping an engine's Prometheus endpoint during a run, in its own process;
the GPUs' (a dcgm-exporter page, or the local nvidia-smi) by the same scraper."""

from tokenpace.adapters.servermetrics.nvidia_smi import NVIDIA_SMI, probe_nvidia_smi
from tokenpace.adapters.servermetrics.parse import parse_metrics
from tokenpace.adapters.servermetrics.process import ScraperProcess, probe_gpu_url, probe_metrics_url

__all__ = [
    "NVIDIA_SMI",
    "ScraperProcess",
    "parse_metrics",
    "probe_gpu_url",
    "probe_metrics_url",
    "probe_nvidia_smi",
]
