"""The real-time sim: an OpenAI-compatible HTTP server whose tokens come from the engine model.

One task runs the engine step by step on the wall clock (time.monotonic: uvloop.time() has only
millisecond resolution): it packs a step, sleeps until the step's
model end time, then writes every produced token. Step k+1 starts at step k's *model* end time, so a
late wake-up does not accumulate into drift; the lateness itself is exported as
tokenpace_sim_emit_lag_seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from tokenpace.sim.endpoints.anthropic_api import AnthropicFormat, parse_messages
from tokenpace.sim.endpoints.anthropic_api import error_body as anthropic_error
from tokenpace.sim.endpoints.api import (
    ApiError,
    GenRequest,
    StreamDefaults,
    error_body,
    generation_from,
    load_json,
    prompt_of,
)
from tokenpace.sim.endpoints.chunks import WireFormat, openai_format
from tokenpace.sim.endpoints.embeddings_api import EmbeddingsFormat, parse_embeddings
from tokenpace.sim.endpoints.faults import Fault, FaultConfig, FaultPicker
from tokenpace.sim.endpoints.gpu_gauges import GpuGauges
from tokenpace.sim.endpoints.metrics import SimMetrics
from tokenpace.sim.endpoints.otlp import EngineTraces
from tokenpace.sim.endpoints.realtime_api import RealtimeFormat, RealtimeSession, accept_session
from tokenpace.sim.endpoints.responses_api import ResponsesFormat, parse_responses
from tokenpace.sim.endpoints.streams import ResponseStream, deliver
from tokenpace.sim.endpoints.tokens import token_id
from tokenpace.sim.model.engine import Engine
from tokenpace.sim.model.request import SimRequest
from tokenpace.sim.profiles.profile import Network, Profile, get_profile
from tokenpace.sim.virtual_time.virtual import sample_rtt
from tokenpace.wire.dialects import routes
from tokenpace.wire.http1.server import HttpRequest, ServerConnection

# How the sim reads each POST dialect's request and writes its answer; the paths are the registry's.
_GENERATORS: dict[str, tuple[Callable[..., GenRequest], Callable[[GenRequest, str, int], WireFormat]]] = {
    "chat": (partial(generation_from, kind="chat"), openai_format),
    "completions": (partial(generation_from, kind="completion"), openai_format),
    "anthropic": (parse_messages, AnthropicFormat),
    "responses": (parse_responses, ResponsesFormat),
    "embeddings": (parse_embeddings, EmbeddingsFormat),
}
_API_ROUTES = routes("/v1")  # path -> dialect, realtime (GET, upgraded) included
RESYNC_S = 0.05  # later than this behind model time, restart the model clock from now
JSON = ("content-type", "application/json")
SSE = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


class SimServer:
    """`async with SimServer(profile="llama-3.1-8b-h100", port=0) as srv: ... srv.url` (ends in /v1)."""

    def __init__(
        self,
        profile: Profile | str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: FaultConfig | None = None,
        network: Network | None = None,
        seed: int = 0,
        otlp_endpoint: str | None = None,  # export engine spans per finished request (sim/endpoints/otlp.py)
        worker: int | None = None,  # one of several processes on the port (`sim --workers`): its index
    ) -> None:
        self.profile = profile if isinstance(profile, Profile) else get_profile(profile)
        self.host, self.port = host, port
        self.network = network or self.profile.network
        self.faults = faults or FaultConfig()
        self.engine = Engine(self.profile, seed=seed)
        self.metrics = SimMetrics(self.profile.served_model_name)
        self.gpu = GpuGauges(self.profile, worker)  # DCGM's gauges from the steps' occupancy
        eng = self.profile.engine
        self.stream_defaults = StreamDefaults(
            eng.reasoning_tokens, eng.tokens_per_chunk, eng.usage_every_chunk
        )
        self._picker = FaultPicker(self.faults)
        self._rng = random.Random(seed + 1)
        self._ids = itertools.count(1)
        self._conns: set[ServerConnection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._task: asyncio.Task[Any] | None = None
        self._wake = asyncio.Event()
        self._started = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.otlp_endpoint = otlp_endpoint
        self.traces: EngineTraces | None = None
        self.worker = worker
        # every answer says which worker's engine served it (x-tokenpace-sim-worker)
        self._worker_header = None if worker is None else ("x-tokenpace-sim-worker", str(worker))
        # Signed lateness of each recent step's last and first written token against its model end
        # time, for exact quantiles of the sim's own timing error.
        self.lag_samples: deque[float] = deque(maxlen=50_000)
        self.first_lag_samples: deque[float] = deque(maxlen=50_000)  # the step's first token

    # ---- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> SimServer:
        loop = self._loop = asyncio.get_running_loop()
        if self.otlp_endpoint and self.traces is None:  # first: a missing extra fails before listening
            self.traces = EngineTraces(self.otlp_endpoint, self.profile.served_model_name)
        self._wake = asyncio.Event()
        self._server = await loop.create_server(
            lambda: ServerConnection(self._handle, self._conns.add, self._conns.discard),
            self.host,
            self.port,
            backlog=4096,
            reuse_address=True,
            reuse_port=self.worker is not None or None,  # several workers share the port
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started = time.monotonic()
        self._task = loop.create_task(self._engine_loop())
        self._task.add_done_callback(self._engine_died)
        return self

    def _engine_died(self, task: asyncio.Task[Any]) -> None:
        # A bug in the engine must not leave clients hanging on a silent server: say so and drop them.
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        sys.stderr.write(f"tokenpace sim: engine loop failed: {type(exc).__name__}: {exc}\n")
        for c in list(self._conns):
            c.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self.traces is not None:  # flush the queued spans (blocking: off the loop)
            traces, self.traces = self.traces, None
            await asyncio.to_thread(traces.close)

    async def __aenter__(self) -> SimServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- the engine on the wall clock --------------------------------------------------------
    async def _engine_loop(self) -> None:
        eng = self.engine
        cold_until = self._started + self.faults.cold_start_s
        t_model: float | None = None
        write_cost = 0.0  # seconds per token written, averaged over recent steps
        while True:
            if not eng.has_work():
                self._wake.clear()
                await self._wake.wait()
                t_model = None
                continue
            now = time.monotonic()
            start = now if t_model is None or now - t_model > RESYNC_S else t_model
            eng.cost.slowdown = self.faults.cold_start_factor if start < cold_until else 1.0
            d = eng.schedule(start)
            if d <= 0:
                t_model = None
                self._wake.clear()
                await self._wake.wait()
                continue
            end = start + d
            self.gpu.step(start, end, len(eng.running))
            # Centre the step's burst of writes on its model end time: start half a burst early.
            lead = min(0.5 * write_cost * eng.tokens_in_step(), 0.5 * d)
            delay = end - lead - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            out = eng.complete(end)
            t_first = time.monotonic()
            if out:
                on_finish = self.traces.finished if self.traces is not None else None
                deliver(out, end, self.metrics, self.engine.abort, on_finish)
            t_last = time.monotonic()
            if out:
                write_cost = 0.8 * write_cost + 0.2 * (t_last - t_first) / len(out)
            self.first_lag_samples.append(t_first - end)
            self.lag_samples.append(t_last - end)
            self.metrics.lag.observe(max(0.0, t_last - end))
            t_model = end

    # ---- routing -----------------------------------------------------------------------------
    def _handle(self, req: HttpRequest) -> None:
        headers = [JSON]
        if self._worker_header is not None:
            headers.append(self._worker_header)
        rid_header = req.headers.get("x-request-id")
        if rid_header is not None:
            headers.append(("x-request-id", rid_header))
        route = (req.method, req.path.rstrip("/") or "/")
        dialect = _API_ROUTES.get(route[1])
        try:
            if dialect is not None and dialect.method == route[0]:
                self._serve_api(req, dialect.api, headers)
            elif route == ("GET", "/v1/models"):
                req.conn.respond(200, self._models(), headers)
            elif route in (("POST", "/tokenize"), ("POST", "/v1/tokenize")):
                req.conn.respond(200, self._tokenize(req.body), headers)
            elif route == ("GET", "/health"):
                req.conn.respond(200, b"", headers)
            elif route == ("GET", "/metrics"):
                req.conn.respond(200, self._metrics(), [("content-type", "text/plain; version=0.0.4")])
            elif dialect is not None or route[1] in ("/v1/models", "/tokenize", "/health", "/metrics"):
                raise ApiError(
                    f"method {req.method} not allowed on {req.path}", status=405, code="method_not_allowed"
                )
            else:
                raise ApiError(f"no route {req.method} {req.path}", status=404, code="not_found")
        except ApiError as e:
            anthropic = dialect is not None and dialect.api == "anthropic"
            req.conn.respond(e.status, anthropic_error(e.message, e.type) if anthropic else e.body(), headers)
        except Exception as e:  # never let a request take the server down
            req.conn.respond(
                500, error_body(f"internal error: {type(e).__name__}: {e}", "server_error"), headers
            )

    def _realtime_response(self, session: RealtimeSession, gen: GenRequest) -> None:
        rid = f"sim-{next(self._ids)}"
        self._admit(ResponseStream(session, gen, RealtimeFormat(gen, rid, 0), []), rid, None)

    def _models(self) -> bytes:
        p, created = self.profile, int(self._started_wall())
        model = {"id": p.served_model_name, "object": "model", "created": created}
        model |= {"owned_by": "tokenpace-sim", "root": p.served_model_name}
        model["max_model_len"] = self.engine.capacity_tokens
        return orjson.dumps({"object": "list", "data": [model]})

    def _started_wall(self) -> float:
        return time.time() - (time.monotonic() - self._started)

    def _tokenize(self, raw: bytes) -> bytes:
        body = load_json(raw)
        kind = "chat" if "messages" in body else "completion"
        words = prompt_of(body, kind)
        return orjson.dumps(
            {
                "tokens": [token_id(w) for w in words],
                "count": len(words),
                "max_model_len": self.engine.capacity_tokens,
            }
        )

    def _metrics(self) -> bytes:
        eng, kv = self.engine, self.engine.kv
        usage, hit_rate = kv.usage, kv.hits / kv.queries if kv.queries else 0.0
        gauges = {
            "vllm:num_requests_running": float(len(eng.running)),
            "vllm:num_requests_waiting": float(len(eng.waiting)),
            "vllm:gpu_cache_usage_perc": usage,
            "vllm:kv_cache_usage_perc": usage,
            "vllm:gpu_prefix_cache_hit_rate": hit_rate,
        }
        counters = {
            "vllm:num_preemptions_total": eng.num_preemptions,
            "vllm:prefix_cache_queries_total": kv.queries,
            "vllm:prefix_cache_hits_total": kv.hits,
        }
        return self.metrics.render(gauges, counters, self._extra)

    def _extra(self) -> list[str]:
        return self._lag_quantiles() + self.gpu.render(time.monotonic())

    def _lag_quantiles(self) -> list[str]:
        lines: list[str] = []
        for name, samples in (
            ("tokenpace_sim_emit_lag_recent_seconds", self.lag_samples),
            ("tokenpace_sim_first_emit_lag_recent_seconds", self.first_lag_samples),
        ):
            xs = sorted(samples)
            lines.append(f"# TYPE {name} gauge")
            for q in (0.5, 0.9, 0.99, 1.0):
                v = xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0
                lines.append(f'{name}{{{self.metrics.label},quantile="{q:g}"}} {v!r}')
        return lines

    # ---- generation --------------------------------------------------------------------------
    def _serve_api(self, req: HttpRequest, api: str, headers: list[tuple[str, str]]) -> None:
        name, room = self.profile.served_model_name, self.engine.capacity_tokens
        if api == "realtime":
            accept_session(req, name, room, self._realtime_response, self.stream_defaults)
            return
        parse, make_format = _GENERATORS[api]
        gen = parse(load_json(req.body), default_model=name, max_len=room, defaults=self.stream_defaults)
        self.serve_generation(req, gen, headers, make_format)

    def serve_generation(
        self,
        req: HttpRequest,
        gen: GenRequest,
        headers: list[tuple[str, str]],
        make_format: Callable[[GenRequest, str, int], WireFormat],
    ) -> None:
        """Faults first, then the request joins the engine; its tokens go out in ``make_format``'s bytes."""
        fault = self._picker.pick(req.headers.get("x-sim-fault"))
        if fault is not None and fault.kind == "error":
            req.conn.respond(
                fault.status,
                error_body(f"simulated error {fault.status}", "server_error", None, fault.status),
                headers,
            )
            return
        if fault is not None and fault.kind == "429":
            retry = self.faults.retry_after_s
            req.conn.respond(
                429,
                error_body(
                    "simulated rate limit: retry later", "rate_limit_error", None, "rate_limit_exceeded"
                ),
                [*headers, ("retry-after", f"{retry:g}")],
            )
            return
        rid = f"sim-{next(self._ids)}"
        fmt = make_format(gen, rid, int(time.time()))
        stream = ResponseStream(req.conn, gen, fmt, [*SSE, *headers[1:]] if gen.stream else headers)
        stream.traceparent = req.headers.get("traceparent")
        # the round trip, plus the API server's own per-request cost before the engine sees it
        rtt = sample_rtt(self.network, self._rng) + self.profile.efficiency.request_overhead_ms / 1e3
        assert self._loop is not None
        if rtt > 0:
            self._loop.call_later(rtt, self._admit, stream, rid, fault)
        else:
            self._admit(stream, rid, fault)

    def _admit(self, s: ResponseStream, rid: str, fault: Fault | None) -> None:
        conn = s.conn
        if conn.closed:
            return
        if s.gen.stream:
            conn.start_stream(200, s.headers)
            opening = s.fmt.opening()
            if opening:
                conn.write_chunk(opening)
        if fault is not None and fault.kind == "hang":
            return  # accepted, then silence until the client gives up
        g = s.gen
        sreq = SimRequest(rid, g.prompt, g.max_tokens, g.min_tokens, g.ignore_eos, s, g.client_limit)
        assert self._loop is not None
        self.engine.add(sreq, time.monotonic())
        if fault is not None:
            at = fault.after_tokens
            if at is None:
                at = self._rng.randint(1, max(1, sreq.target_len - 1))
            at = max(1, min(at, sreq.target_len))
            if fault.kind == "cut" and at < sreq.target_len:
                s.cut_at = at
            elif fault.kind == "malformed":
                s.malformed_at = at
        conn.on_lost = lambda: self._lost(sreq)
        self._wake.set()

    def _lost(self, sreq: SimRequest) -> None:
        if sreq.state not in ("finished", "aborted"):
            self.metrics.success["abort"] += 1
        self.engine.abort(sreq)

    def snapshot(self) -> dict[str, Any]:
        """Engine state for tests and the CLI."""
        eng = self.engine
        return {
            "running": len(eng.running),
            "waiting": len(eng.waiting),
            "kv_usage": eng.kv.usage,
            "preemptions": eng.num_preemptions,
            "prefix_queries": eng.kv.queries,
            "prefix_hits": eng.kv.hits,
        }
