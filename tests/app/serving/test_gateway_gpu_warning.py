"""The gateway's start: an upstream's gpu_metrics= page that does not answer is one warning line."""

from __future__ import annotations

from tokenpace.app.serving.gateway_serving import upstream_metrics_warnings
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.testing.dcgm_exporter import DcgmExporter


def test_a_gpu_page_that_does_not_answer_is_one_warning_at_start():
    with DcgmExporter() as good, DcgmExporter(hostile="garbage") as bad:
        config = GatewayConfig(
            upstreams=(
                parse_upstream(f"a=http://127.0.0.1:9/v1,metrics={good.url},gpu_metrics={good.url}"),
                parse_upstream(f"b=http://127.0.0.1:9/v1,metrics={good.url},gpu_metrics={bad.url}"),
            )
        )
        assert upstream_metrics_warnings(config) == [
            "warning: upstream b's gpu_metrics is not Prometheus text"
        ]
