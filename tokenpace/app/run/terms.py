"""The values a run's options take, parsed where the run's code lives (percentiles, arrivals, dialects,
lengths, ramps, SLOs, --fail-on gates, header values, output paths) and the record types a view
shows: the CLI reads them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.adapters.safe_files import check_output
from tokenpace.core.analysis.comparison.fail_on import parse_fail_on
from tokenpace.core.analysis.comparison.fail_on_judge import FailOnReport
from tokenpace.core.analysis.diagnosis.live_figures import LiveSnapshot
from tokenpace.core.asked_percentiles import parse_percentiles
from tokenpace.core.credentials import header_problem, strip_credentials
from tokenpace.core.metrics import Slo
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.schedule.arrivals import ARRIVALS
from tokenpace.core.schedule.ramp import Ramp
from tokenpace.core.workload.lengths import MAX_TOKENS, LengthDist, LengthSpecError, parse_length
from tokenpace.wire.dialects import DIALECTS
from tokenpace.wire.dialects.base import Sampling
from tokenpace.wire.endpoint import EndpointError

__all__ = [
    "ARRIVALS",
    "DIALECTS",
    "MAX_TOKENS",
    "EndpointError",
    "FailOnReport",
    "LengthDist",
    "LengthSpecError",
    "LiveSnapshot",
    "Ramp",
    "RequestRecord",
    "Sampling",
    "Slo",
    "Status",
    "check_output",
    "header_problem",
    "parse_fail_on",
    "parse_length",
    "parse_percentiles",
    "strip_credentials",
]
