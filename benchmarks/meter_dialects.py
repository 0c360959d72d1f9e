"""CPU per streamed event of the gateway's meter, per API dialect, in-process (no sockets).

The events are the simulator's own bytes for each dialect (chat, completions, Anthropic Messages,
Responses, Realtime), fed to the meter one event per call as the relay does when each read holds
one event. CPU time (``time.process_time``) over all events of ``--requests`` streams of
``--tokens`` tokens, divided by the token-carrying events; the spread of ``--repeat`` runs is shown.

    .venv/bin/python benchmarks/meter_dialects.py [--requests 200] [--tokens 256] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from tokenpace.core.record import RequestRecord
from tokenpace.gateway.metering.meter import Meter
from tokenpace.gateway.metering.outcome import Outcome
from tokenpace.gateway.metering.realtime_meter import RealtimeMeter
from tokenpace.sim.endpoints.anthropic_api import AnthropicFormat, parse_messages
from tokenpace.sim.endpoints.api import StreamDefaults, generation_from
from tokenpace.sim.endpoints.chunks import ANSWER, REASONING, WireFormat, openai_format
from tokenpace.sim.endpoints.realtime_api import RealtimeFormat
from tokenpace.sim.endpoints.responses_api import ResponsesFormat, parse_responses
from tokenpace.sim.endpoints.tokens import output_word
from tokenpace.wire.dialects import get_dialect
from tokenpace.wire.websocket import FrameReader

CHAT = [{"role": "user", "content": "hello there"}]


def sim_events(api: str, tokens: int, reasoning: int) -> list[bytes]:
    """One stream's events as the sim writes them, one element per event."""
    d = StreamDefaults(reasoning_tokens=reasoning)
    fmt: WireFormat
    if api == "anthropic":
        gen = parse_messages({"messages": CHAT, "max_tokens": tokens, "stream": True}, "m", 1 << 20, d)
        fmt = AnthropicFormat(gen, "r", 0)
    elif api == "responses":
        gen = parse_responses(
            {"input": "hello", "max_output_tokens": tokens, "stream": True}, "m", 1 << 20, d
        )
        fmt = ResponsesFormat(gen, "r", 0)
    elif api == "realtime":
        gen = generation_from({"max_tokens": tokens}, "realtime", "m", 1 << 20, StreamDefaults(), ["hi"])
        fmt = RealtimeFormat(gen, "r", 0)
    else:
        body = {"max_tokens": tokens, "stream": True, "stream_options": {"include_usage": True}}
        body.update({"messages": CHAT} if api == "chat" else {"prompt": "hello there"})
        gen = generation_from(body, "chat" if api == "chat" else "completion", "m", 1 << 20, d)
        fmt = openai_format(gen, "r", 0)
    out = [fmt.opening()]
    r = gen.reasoning
    for i in range(tokens):
        out.append(fmt.chunk(output_word(i), REASONING if i < r else ANSWER, i == tokens - 1, i + 1))
    out.append(fmt.closing("length", len(gen.prompt), tokens))
    if api == "realtime":  # WebSocket frames: the meter sees each message's payload
        return [payload for _, payload in FrameReader().feed(b"".join(out))]
    return [e for e in out if e]


def http_run(api: str, streams: list[list[bytes]]) -> int:
    dialect = get_dialect(api)
    n = 0
    for events in streams:
        rec = RequestRecord("r")
        meter = Meter(rec, dialect, "text/event-stream", "")
        for now, event in enumerate(events):
            meter.feed(event, now)
        n += len(rec.token_ns)
    return n


def realtime_run(streams: list[list[bytes]]) -> int:
    dialect = get_dialect("realtime")
    done: list[RequestRecord] = []

    def finish(rec: RequestRecord, _o: Outcome, _e: str | None) -> None:
        done.append(rec)

    meter = RealtimeMeter(dialect, lambda now: RequestRecord("r", sent_ns=now), finish, 0)
    create = '{"type":"response.create","response":{}}'
    for events in streams:
        meter.from_client(create, 0)
        for now, event in enumerate(events):
            meter.from_upstream(event.decode(), now)
    return sum(len(r.token_ns) for r in done)


def measure(run: Callable[[], int], repeat: int) -> list[float]:
    per_event = []
    for _ in range(repeat):
        t0 = time.process_time()
        n = run()
        per_event.append((time.process_time() - t0) / n * 1e6)
    return per_event


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| api | events per stream | CPU per token event, median (min-max) |")
    print("|---|---|---|")
    for api in ("chat", "completions", "anthropic", "responses", "realtime"):
        events = sim_events(api, args.tokens, 8 if api != "realtime" else 0)
        streams = [events] * args.requests
        run = partial(realtime_run, streams) if api == "realtime" else partial(http_run, api, streams)
        us = measure(run, args.repeat)
        print(f"| {api} | {len(events)} | {statistics.median(us):.2f} us ({min(us):.2f}-{max(us):.2f}) |")


if __name__ == "__main__":
    main()
