"""Engine metrics: names of every engine mapped to one vocabulary, window latencies, decomposition."""

import pytest

from tokenpace.adapters.servermetrics.parse import parse_metrics, series_key, split_key
from tokenpace.core.analysis.diagnosis.engine_metrics import analyse, detect_engine, normalize
from tokenpace.core.record import RequestRecord

MS = 1_000_000


def vllm_text(running, ttft_sum, ttft_count, buckets, queue_sum=None, kv_name="vllm:kv_cache_usage_perc"):
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{model_name="m"}} {running}',
        "# TYPE " + kv_name + " gauge",
        f'{kv_name}{{model_name="m"}} 0.25',
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    for le, count in buckets:
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{le}",model_name="m"}} {count}')
    lines += [
        f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {ttft_sum}',
        f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {ttft_count}',
    ]
    if queue_sum is not None:
        lines += [
            "# TYPE vllm:request_queue_time_seconds histogram",
            f'vllm:request_queue_time_seconds_sum{{model_name="m"}} {queue_sum}',
            f'vllm:request_queue_time_seconds_count{{model_name="m"}} {ttft_count}',
        ]
    return "\n".join(lines) + "\n"


def test_parse_and_keys_round_trip():
    samples = parse_metrics(vllm_text(3, 1.0, 4, [("0.1", 1), ("+Inf", 4)]))
    assert samples['vllm:num_requests_running{model_name="m"}'] == 3
    key = series_key("x", {"b": "2", "a": "1"})
    assert key == 'x{a="1",b="2"}' and split_key(key) == ("x", {"a": "1", "b": "2"})
    with pytest.raises(ValueError):
        parse_metrics("this is { not prometheus")


@pytest.mark.parametrize(
    ("names", "engine"),
    [
        (["vllm:num_requests_running"], "vllm"),
        (["sglang:num_running_reqs"], "sglang"),
        (["sglang_num_running_reqs"], "sglang"),
        (["tgi_queue_size"], "tgi"),
        (["llamacpp:requests_processing"], "llama.cpp"),
        (["process_cpu_seconds_total"], "unknown"),
    ],
)
def test_engines_are_recognised(names, engine):
    assert detect_engine(normalize(dict.fromkeys(names, 1.0))) == engine


def test_window_latency_and_decomposition_by_hand():
    # between the scrapes the engine saw 4 first tokens totalling 0.8 s: mean 200 ms;
    # 3 of them under 0.1 s ... wait: bucket deltas 0.1 -> 2, 0.5 -> 4: p50 = 0.1 exactly
    first = {
        "t_ns": 1_000 * MS,
        "samples": parse_metrics(vllm_text(0, 0.0, 0, [("0.1", 0), ("0.5", 0), ("+Inf", 0)], 0.0)),
    }
    last = {
        "t_ns": 3_000 * MS,
        "samples": parse_metrics(vllm_text(2, 0.8, 4, [("0.1", 2), ("0.5", 4), ("+Inf", 4)], 0.2)),
    }
    records = []
    for i in range(4):  # client saw 250 ms TTFT for each, first tokens inside the window
        r = RequestRecord(f"r{i}", sent_ns=(1_500 + i) * MS)
        r.first_token_ns = r.sent_ns + 250 * MS
        records.append(r)
    out = analyse([first, last], records, start_ns=1_000 * MS)
    assert out["engine"] == "vllm"
    ttft = out["engine_latency_ms"]["ttft"]
    assert ttft["n"] == 4 and ttft["mean"] == pytest.approx(200)
    assert ttft["p50"] == pytest.approx(100)
    assert ttft["p95"] == pytest.approx(100 + 400 * (3.8 - 2) / 2)  # interpolated in (0.1, 0.5]
    dec = out["decomposition"]
    assert dec["client_ttft_mean_ms"] == pytest.approx(250)
    assert dec["engine_queue_mean_ms"] == pytest.approx(50)
    assert dec["network_and_client_ms"] == pytest.approx(50)
    assert out["series"]["running"] == [[0.0, 0.0], [2.0, 2.0]]
    assert out["series"]["kv_usage"][0][1] == 0.25


def test_deprecated_vllm_names_still_read():
    a = {
        "t_ns": 0,
        "samples": parse_metrics(vllm_text(1, 0, 0, [("+Inf", 0)], kv_name="vllm:gpu_cache_usage_perc")),
    }
    out = analyse([a], [], start_ns=0)
    assert out["series"]["kv_usage"] == [[0.0, 0.25]]


def test_failed_scrapes_are_counted_not_fatal():
    out = analyse([{"t_ns": 0, "error": "refused"}], [], start_ns=0)
    assert out == {"scrapes": 1, "errors": 1, "engine": "unknown"}


def queue_histogram(count: int, total_s: float) -> str:
    """vLLM's queue-time histogram, buckets from 0.3 s, with every observation under 0.3 s."""
    rows = [f'vllm:request_queue_time_seconds_bucket{{le="{le}"}} {count}' for le in ("0.3", "0.5", "+Inf")]
    rows += [
        f"vllm:request_queue_time_seconds_sum {total_s}",
        f"vllm:request_queue_time_seconds_count {count}",
    ]
    return "\n".join(rows) + "\n"


def test_engine_percentiles_say_their_bucket_and_refuse_a_single_bucket():
    # 10 requests that queued 8 ms on average all land in (0, 0.3 s]; interpolation would call
    # P50 150 ms. The mean (from the sum) is the figure to use.
    first = {"t_ns": 0, "samples": parse_metrics(queue_histogram(0, 0.0))}
    last = {"t_ns": 10**9, "samples": parse_metrics(queue_histogram(10, 0.08))}
    queue = analyse([first, last], [], start_ns=0)["engine_latency_ms"]["queue"]
    assert queue["n"] == 10 and queue["mean"] == pytest.approx(8.0)
    assert queue["p50"] is None and queue["p50_bucket_ms"] == [0.0, 300.0]
    assert queue["p95"] is None and "bucket" in queue["percentiles_from"]


def test_engine_percentile_buckets_are_reported_beside_the_interpolation():
    first = {
        "t_ns": 0,
        "samples": parse_metrics(vllm_text(0, 0.0, 0, [("0.1", 0), ("0.5", 0), ("+Inf", 0)], 0.0)),
    }
    last = {
        "t_ns": 10**9,
        "samples": parse_metrics(vllm_text(2, 0.8, 4, [("0.1", 2), ("0.5", 4), ("+Inf", 4)], 0.2)),
    }
    ttft = analyse([first, last], [], start_ns=0)["engine_latency_ms"]["ttft"]
    assert ttft["p50_bucket_ms"] == [0.0, 100.0] and ttft["p95_bucket_ms"] == [100.0, 500.0]


def test_tokenpace_gateway_metrics_are_named_as_the_gateway_not_an_unknown_engine():
    gateway = {"tokenpace_gateway_requests_total": 3.0, "process_cpu_seconds_total": 1.0}
    assert detect_engine(gateway) == "tokenpace-gateway"
    assert detect_engine({"process_cpu_seconds_total": 1.0}) == "unknown"
    assert detect_engine(gateway | {"vllm:num_requests_running": 1.0}) == "vllm"  # an engine wins
