"""bench --otlp-sample: which requests are traced. Deterministic for a seed, a share of the run
within a binomial bound, and as likely late in the run as early; and what reaches the wire."""

from __future__ import annotations

import math

import pytest

from tokenpace.app.bench.bench import build_requests
from tokenpace.app.run.bench_config import BenchConfig
from tokenpace.core.trace_sample import check_share, trace_sampled
from tokenpace.core.workload import WorkItem
from tokenpace.wire.tracecontext import is_sampled, parse_traceparent

N, SHARE = 200, 0.25


def _binomial_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    """Mean +- 5 standard deviations: a coin of bias p per request leaves it about once a million."""
    spread = sigmas * math.sqrt(n * p * (1 - p))
    return n * p - spread, n * p + spread


LOW, HIGH = _binomial_bounds(N, SHARE)


def _sampled(seed: int, share: float = SHARE, n: int = N) -> set[int]:
    return {i for i in range(n) if trace_sampled(seed, i, share)}


@pytest.mark.parametrize("seed", range(10))
def test_a_share_of_the_requests_within_a_binomial_bound_and_the_same_set_for_the_same_seed(
    seed: int,
) -> None:
    chosen = _sampled(seed)
    assert LOW <= len(chosen) <= HIGH
    assert _sampled(seed) == chosen  # reproducible
    late = {i for i in chosen if i >= N // 2}  # not "the first 25 %": the late half is as likely
    low, high = _binomial_bounds(N // 2, SHARE)
    assert low <= len(late) <= high and low <= len(chosen - late) <= high


def test_another_seed_samples_other_requests_and_share_one_samples_all() -> None:
    assert _sampled(0) != _sampled(1)
    assert _sampled(3, 1.0) == set(range(N))


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5, float("nan")])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match=r"--otlp-sample must be a share in \(0, 1\]"):
        check_share(share)


def test_the_sampled_flag_read_from_a_traceparent() -> None:
    trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    assert is_sampled(f"00-{trace}-{parent}-01") and is_sampled(f"00-{trace}-{parent}-03")
    assert not is_sampled(f"00-{trace}-{parent}-00") and not is_sampled(f"00-{trace}-{parent}-02")
    assert is_sampled(None) and is_sampled("00-bad-00")  # none or a bad one: a new, recorded trace


class _Sender:
    def prepare(
        self, prompt: str, max_tokens: int, rid: str, messages: object, traceparent: str | None
    ) -> bytes:
        return (traceparent or "").encode()


def test_every_request_sends_a_traceparent_and_only_the_sampled_say_so() -> None:
    cfg = BenchConfig(url="http://127.0.0.1:1/v1", concurrency=1, requests=N, seed=7)
    cfg.otlp_endpoint, cfg.otlp_sample = "http://127.0.0.1:4318/v1/traces", SHARE
    items = (WorkItem(i, "p", 4, 4) for i in range(N))
    built = list(build_requests(cfg, items, _Sender(), "r", N))  # type: ignore[arg-type]
    assert {r.index for r, _ in built if r.trace_sampled} == _sampled(7)
    for rec, header in built:
        parsed = parse_traceparent(header.decode())
        assert parsed == (rec.trace_id, rec.span_id)  # unsampled ones keep their ids: records join
        assert header.decode().endswith("-01" if rec.trace_sampled else "-00")
    assert len({r.trace_id for r, _ in built}) == N


@pytest.mark.parametrize(
    ("endpoint", "share", "says"),
    [
        (None, 0.5, "--otlp-sample needs --otlp-endpoint"),
        ("http://127.0.0.1:4318/v1/traces", 0.0, "must be a share in (0, 1]"),
    ],
)
def test_the_config_refuses_a_bad_sampling(endpoint: str | None, share: float, says: str) -> None:
    cfg = BenchConfig(url="http://127.0.0.1:1/v1", concurrency=1, requests=1, otlp_endpoint=endpoint)
    cfg.otlp_sample = share
    with pytest.raises(ValueError) as exc:
        cfg.validate()
    assert says in str(exc.value)
