"""`tokenpace bench`'s options as a ``BenchConfig`` (sweep shares them), and where ``--out`` goes."""

from __future__ import annotations

from typing import Any

import click

from tokenpace.app.run.bench_config import DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, BenchConfig
from tokenpace.app.run.terms import Sampling, parse_fail_on, parse_percentiles
from tokenpace.cli import parsing
from tokenpace.cli.bench import workload_opts

STDOUT_NAMES = ("-", "/dev/stdout")


def stdout_out(o: dict[str, Any]) -> bool:
    """``--out -`` (or /dev/stdout): the result JSON goes to standard output, and the result file
    with its records to the default place (results/TIME-ID.json), named in the JSON."""
    if o.get("out") is not None and str(o["out"]) in STDOUT_NAMES:
        o["out"] = None
        return True
    return False


def bench_config(o: dict[str, Any]) -> BenchConfig:
    """The bench options as a config (sweep shares them); click.BadParameter on bad input."""
    parsing.check_numbers(o)  # nan, inf, negative seeds, absurd sizes: one line naming the flag
    rate = o["rate"]
    concurrency = o["concurrency"]
    if rate is not None and concurrency is not None:
        raise click.BadParameter(
            "--concurrency is closed loop and --rate is open loop: pick one "
            "(cap an open loop with --max-concurrency)"
        )
    if rate is None and concurrency is None:
        concurrency = DEFAULT_CONCURRENCY
    duration = parsing.duration_s(o["duration"], "--duration") if o["duration"] else None
    requests = o["requests"]
    if requests is None and duration is None:
        requests = DEFAULT_REQUESTS
    if o["url"] and o["sim_profile"]:
        raise click.BadParameter("--url and --sim name two targets: give one")
    headers = parsing.headers(o["headers"])
    config = BenchConfig(
        url=o["url"] or "",
        model=o["model"],
        api=o["api"],
        stream=not o["no_stream"],
        concurrency=concurrency,
        rate=rate,
        arrival=o["arrival"],
        burstiness=o["burstiness"],
        max_concurrency=o["max_concurrency"],
        requests=requests,
        duration_s=duration,
        warmup=o["warmup"],
        timeout_s=parsing.duration_s(o["timeout"], "--timeout"),
        input_len=parsing.length(o["input_len"], "--input-len"),
        output_len=parsing.length(o["output_len"], "--output-len"),
        seed=o["seed"],
        sampling=Sampling(o["temperature"], o["top_p"], o["ignore_eos"]),
        headers=headers,
        api_key=o["api_key"],
        request_id_prefix=o["request_id_prefix"],
        slo=parsing.slo(o["slo"]),
        labels=parsing.key_values(o["labels"], "=", "a label as KEY=VALUE"),
        server_metrics=o["server_metrics"],
        server_metrics_interval_s=parsing.duration_s(
            o["server_metrics_interval"], "--server-metrics-interval"
        ),
        gpu_metrics=o.get("gpu_metrics") or "auto",
        connect_probe=o["connect_probe"],
        new_connection_per_request=o["new_connection_per_request"],
        resend_unanswered=o.get("resend_unanswered", False),
        otlp_endpoint=o.get("otlp_endpoint"),
        otlp_sample=o.get("otlp_sample"),
        tls_verify=not o["insecure"],
        ca_cert=o["ca_cert"],
        workers=parsing.workers(o.get("workers") or "1"),
        ray=o.get("ray"),
        ramp=o.get("ramp"),
        keep_texts=bool(o.get("save_detailed")),
        stall_tolerance=parsing.share(o.get("stall_tolerance") or "10%", "--stall-tolerance"),
        percentiles=parse_percentiles(o["percentiles"]) if o.get("percentiles") is not None else None,
        fail_on=parse_fail_on(o["fail_on"]) if o.get("fail_on") is not None else (),
    )
    with_workload: BenchConfig = workload_opts.apply(config, o)  # reads the files: errors before any load
    return with_workload
