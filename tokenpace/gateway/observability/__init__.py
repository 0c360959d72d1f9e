"""What the gateway shows: Prometheus series and SLO buckets, alert rules and the Grafana dashboard,
OTLP spans and hop spans, engine TTFT beside gateway TTFT, per-arm and shadow series, rate-limited
logs."""
