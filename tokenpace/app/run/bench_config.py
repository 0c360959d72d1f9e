"""What a bench run is asked to do, and what it gives back."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tokenpace import __version__
from tokenpace.app.run.exit_status import RunOutcome
from tokenpace.app.run.workloads import WorkloadOptions
from tokenpace.app.watch.health import HealthReport
from tokenpace.core.analysis.comparison.fail_on import FailOnLine
from tokenpace.core.analysis.comparison.fail_on_judge import FailOnReport, judge_fail_on
from tokenpace.core.analysis.diagnosis.client_stalls import DEFAULT_TOLERANCE
from tokenpace.core.asked_percentiles import DEFAULT_ASKED
from tokenpace.core.credentials import has_control, header_problem
from tokenpace.core.metrics import DEFINITIONS, Slo, Summary
from tokenpace.core.record import RequestRecord
from tokenpace.core.schedule.ramp import Ramp
from tokenpace.core.trace_sample import check_share
from tokenpace.core.workload.lengths import LengthDist, parse_length
from tokenpace.wire.dialects.base import Sampling

# What a run does when neither a load nor a bound is given (the CLI's defaults too).
DEFAULT_CONCURRENCY = 16
DEFAULT_REQUESTS = 200


@dataclass
class BenchConfig:
    url: str
    model: str | None = None
    api: str = "chat"
    stream: bool = True
    concurrency: int | None = None  # closed loop when rate is None
    rate: float | None = None  # open loop, requests/s
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None  # cap on requests in flight for open loop
    requests: int | None = None  # measured requests (warm-up not included)
    duration_s: float | None = None
    warmup: int = 0
    timeout_s: float = 300.0
    input_len: LengthDist = field(default_factory=lambda: parse_length("512"))
    output_len: LengthDist = field(default_factory=lambda: parse_length("128"))
    seed: int = 0
    prompt_salt: str = "auto"  # auto: a salt from the run id; none: identical prompts per seed; else a key
    sampling: Sampling = field(default_factory=Sampling)
    headers: dict[str, str] = field(default_factory=dict)
    api_key: str | None = None
    request_id_prefix: str | None = None
    slo: Slo = field(default_factory=Slo)
    labels: dict[str, str] = field(default_factory=dict)
    target: str = "external"  # or "sim:<profile>" when tokenpace started the engine itself
    workload_opts: WorkloadOptions | None = None  # datasets, traces, prefixes, sessions (issue 7)
    server_metrics: str = "auto"  # "auto" (the endpoint's own /metrics if it answers), "off", a URL
    server_metrics_interval_s: float = 1.0
    # the GPUs: "auto" (DCGM fields on the engine's /metrics, else a local nvidia-smi, else off),
    # "off", "nvidia-smi", a dcgm-exporter URL; scraped at server_metrics_interval_s
    gpu_metrics: str = "auto"
    connect_probe: bool = False
    new_connection_per_request: bool = False
    otlp_endpoint: str | None = None  # a trace per request (traceparent sent), client spans exported here
    otlp_sample: float | None = None  # share traced, in (0, 1] (core/trace_sample.py); None: all
    resend_unanswered: bool = False  # resend once what a reused connection dropped unanswered (recorded)
    tls_verify: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged into every request body
    ready_check_timeout_s: float = 0.0  # wait this long for the endpoint to answer (0: ask once)
    ca_cert: str | None = None
    workers: int | str = 1  # worker processes sending the load, or "auto" (app.workers)
    ray: str | None = None  # run the workers as Ray actors: a cluster address or "auto"
    ramp: Ramp | None = None  # ramp-up of the rate or the users (core.workload.ramp)
    percentiles: tuple[float, ...] | None = None  # --percentiles: shown with intervals (None: P50-P99)
    keep_texts: bool = False  # keep each answer's text (vLLM's --save-detailed generated_texts)
    stall_tolerance: float = DEFAULT_TOLERANCE  # share of requests client stalls may hold (--stall-tolerance)
    fail_on: tuple[FailOnLine, ...] = ()  # --fail-on: absolute gates judged on the run's intervals

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    def with_gate_percentiles(self) -> BenchConfig:
        """The config measuring every percentile a --fail-on line asks for with its interval: one
        past P50/P90/P95/P99 (say P99.9) joins the asked percentiles."""
        asked = self.percentiles or DEFAULT_ASKED
        gated = {q for line in self.fail_on if (q := line.q) is not None}
        if gated <= set(asked):
            return self
        return replace(self, percentiles=tuple(sorted(set(asked) | gated)))

    def salt_key(self, run_id: str) -> str | None:
        """What the run's prompt salt is made from: the run id (auto), the user's key, or no salt."""
        if self.prompt_salt == "none":
            return None
        return run_id if self.prompt_salt == "auto" else self.prompt_salt

    def validate(self) -> None:
        if self.rate is None and not self.concurrency:
            raise ValueError("give --concurrency N (closed loop) or --rate R (open loop)")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("--rate must be positive")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("--max-concurrency must be at least 1")
        if self.requests is None and self.duration_s is None:
            raise ValueError("give --requests N and/or --duration D to bound the run")
        if self.requests is not None and self.requests < 1:
            raise ValueError("--requests must be at least 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError("--duration must be positive")
        if self.warmup < 0:
            raise ValueError("--warmup must not be negative")
        if self.timeout_s <= 0:
            raise ValueError("--timeout must be positive")
        if self.workers != "auto" and (not isinstance(self.workers, int) or self.workers < 1):
            raise ValueError("--workers must be a whole number of at least 1, or auto")
        if self.workers != 1 and self.workload_opts is not None and self.workload_opts.sessions:
            raise ValueError("--workers does not split multi-turn sessions (--turns): use one worker")
        if self.keep_texts and self.workers != 1:
            raise ValueError("--save-detailed keeps the answers' texts in one process: drop --workers")
        if not 0 <= self.stall_tolerance <= 1:
            raise ValueError("--stall-tolerance must be a share between 0 and 1 (e.g. 5%)")
        if self.server_metrics_interval_s < 0.1:
            raise ValueError("--server-metrics-interval must be at least 100ms")
        if self.gpu_metrics not in ("auto", "off", "nvidia-smi") and not self.gpu_metrics.startswith(
            ("http://", "https://")
        ):
            raise ValueError(
                f"--gpu-metrics: {self.gpu_metrics!r} is none of URL (http://...), nvidia-smi, auto, off"
            )
        turns = self.workload_opts.turns if self.workload_opts is not None else 1
        if turns > 1 and self.api not in ("chat", "completions"):
            raise ValueError(
                f"--turns rebuilds the history from chat answers: use --api chat, not {self.api}"
            )
        if any(line.metric == "goodput" for line in self.fail_on) and self.slo.is_empty():
            raise ValueError("--fail-on goodput>...: goodput counts requests meeting --slo lines; give --slo")
        self._validate_ramp()
        self._validate_headers()
        self._validate_tracing()

    @property
    def ramp_excluded_s(self) -> float:
        """How long after the first send the steady window must wait for the ramp to end."""
        return self.ramp.excluded_s if self.ramp is not None else 0.0

    def _validate_ramp(self) -> None:
        if self.ramp is None:
            return
        self.ramp.validate()
        if self.ramp.of_rate and not self.open_loop:
            raise ValueError(
                "a rate ramp (--ramp-up-start-rps/--ramp-up-end-rps) is open loop: drop --concurrency"
            )
        if not self.ramp.of_rate and self.open_loop:
            raise ValueError("an open loop ramps its rate: give --ramp-up-start-rps and --ramp-up-end-rps")
        if self.ramp.duration_s is None and self.requests is None:
            raise ValueError("a ramp over the whole run needs --num-prompts (or give --ramp-up DURATION)")
        if self.workers != 1:
            raise ValueError("--ramp-up runs in one worker process: drop --workers")
        if self.workload_opts is not None and (self.workload_opts.sessions or self.workload_opts.trace):
            raise ValueError("--ramp-up does not combine with --turns or --trace")

    def _validate_tracing(self) -> None:
        if self.otlp_sample is None:
            return
        check_share(self.otlp_sample)
        if not self.otlp_endpoint:
            raise ValueError("--otlp-sample needs --otlp-endpoint URL (where the sampled spans go)")

    def _validate_headers(self) -> None:
        """Before any load: a CR or LF in a value would smuggle in a header (values never shown)."""
        for name, value in self.headers.items():
            problem = header_problem(name, value)
            if problem:
                raise ValueError(f"--header: {problem}")
        if self.request_id_prefix and has_control(self.request_id_prefix):  # sent as x-request-id
            raise ValueError("--request-id-prefix holds a control character (CR, LF, NUL, ...)")
        if self.api_key is not None and has_control(self.api_key):
            raise ValueError(
                "--api-key / OPENAI_API_KEY: the key holds a control character (a trailing newline?); "
                "refused, not shown"
            )


@dataclass
class BenchResult:
    run_id: str
    conditions: dict[str, Any]
    records: list[RequestRecord]
    summary: Summary
    health: HealthReport
    interrupted: bool
    stop_reason: str
    warnings: list[str]
    observed: dict[str, Any] = field(default_factory=dict)  # server_metrics, gpu_metrics, connect_probe
    texts: dict[str, str] = field(default_factory=dict)  # answers by request id (keep_texts only)
    fail_on: FailOnReport | None = None  # --fail-on judged on this run's summary (judge_gates)

    def judge_gates(self, lines: tuple[FailOnLine, ...]) -> None:
        """Judge the --fail-on lines on the summary's intervals (the asked percentiles' too)."""
        self.fail_on = judge_fail_on(lines, self.summary.to_dict()) if lines else None

    @property
    def invalid_reasons(self) -> list[str]:
        """Why the run does not stand for the load asked: client health, an interruption or abort,
        or no success at all. A run with reasons is stored with ``valid: false``."""
        reasons = list(self.health.invalid_reasons)
        if self.interrupted or self.stop_reason.startswith("aborted"):
            reasons.append(f"the run did not finish: {self.stop_reason}")
        if not self.summary.counts.get("ok"):
            sent = self.summary.counts.get("sent", 0)
            reasons.append(f"no request succeeded ({sent} sent)")
        return reasons

    @property
    def valid(self) -> bool:
        return not self.invalid_reasons

    @property
    def outcome(self) -> RunOutcome:
        counts = self.summary.counts
        return RunOutcome(
            self.interrupted, self.stop_reason, self.health.valid, counts.get("sent", 0), counts.get("ok", 0)
        )

    def to_dict(self, records_file: str | None = None) -> dict[str, Any]:
        summary = self.summary.to_dict()
        summary["client"] = self.health.to_dict()
        server = self.observed.get("server_metrics") or {}
        hit_rate = (server.get("counters") or {}).get("prefix_hit_rate")
        if server.get("decomposition") or server.get("engine_latency_ms") or hit_rate is not None:
            summary["server"] = {k: server.get(k) for k in ("engine", "decomposition", "engine_latency_ms")}
            summary["server"]["prefix_hit_rate"] = hit_rate  # a warm cache makes runs incomparable
        return {
            "tokenpace_version": __version__,
            "run_id": self.run_id,
            "valid": self.valid,
            "invalid_reasons": self.invalid_reasons,
            "interrupted": self.interrupted,
            "stop_reason": self.stop_reason,
            "warnings": self.warnings,
            "conditions": self.conditions,
            "summary": summary,
            "definitions": DEFINITIONS,
            "records": {"path": records_file, "format": "jsonl", "count": len(self.records)},
            **self.observed,
            **({"fail_on": self.fail_on.to_dict()} if self.fail_on is not None else {}),
        }
