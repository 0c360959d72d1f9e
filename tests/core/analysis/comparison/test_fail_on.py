"""--fail-on lines parsed: metric names as the summary uses them, units, directions, clear errors."""

from __future__ import annotations

import pytest

from tokenpace.core.analysis.comparison.fail_on import MAX_LINES, parse_fail_on


def test_the_issue_example_parses_in_the_summary_units() -> None:
    lines = parse_fail_on("ttft.p95<500ms, tpot.p99<60ms,error_rate<1%")
    assert [(x.name, x.op, x.limit) for x in lines] == [
        ("ttft.p95", "<", 500.0),
        ("tpot.p99", "<", 60.0),
        ("error_rate", "<", 0.01),
    ]
    assert lines[0].q == 95.0 and lines[0].upper and lines[2].q is None


def test_seconds_means_and_lower_lines() -> None:
    e2e, itl, thr, out, good = parse_fail_on(
        "e2e.p99.9<=2.5s,itl.mean<20ms,throughput>20/s,output_throughput>=900tok/s,goodput>5"
    )
    assert (e2e.limit, e2e.q, e2e.op) == (2500.0, 99.9, "<=")
    assert itl.stat == "mean" and itl.q is None
    assert (thr.limit, thr.upper, out.op, good.limit) == (20.0, False, ">=", 5.0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft<500ms", "ttft.p95 or ttft.mean"),
        ("ttft.p95>500ms", "upper line"),
        ("throughput<5", "lower line"),
        ("ttft.p95<500", "in ms or s"),
        ("error_rate<1", "in %"),
        ("error_rate<101%", "at most 100%"),
        ("latency.p95<5ms", "unknown metric 'latency'"),
        ("error_rate.p95<1%", "only latencies"),
        ("ttft.p95<5ms,ttft.p95<6ms", "given twice"),
        ("ttft.p0<5ms", "strictly between 0 and 100"),
        ("ttft.p95 = 5%", "expected METRIC<LIMIT"),
        (",", "at least one line"),
        ("output_throughput>5req/s", "tok/s"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(text: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_fail_on(text)
    message = str(err.value)
    assert says in message and message.startswith("--fail-on") and "\n" not in message


def test_lines_are_bounded() -> None:
    many = ",".join(f"ttft.p{p}<1s" for p in range(1, MAX_LINES + 2))
    with pytest.raises(ValueError, match=f"at most {MAX_LINES}"):
        parse_fail_on(many)
