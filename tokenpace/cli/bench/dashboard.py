"""The end-of-run dashboard: every headline number side by side, conditions beside them."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tokenpace.app.reports.tables import fmt as _fmt
from tokenpace.app.reports.tables import gpu_lines, interval, percentile_names, percentile_points
from tokenpace.cli.bench import workload_view
from tokenpace.cli.fit import whole

_LATENCY_ROWS = (
    ("TTFT", "ttft_ms"),
    ("TTFAT (answer)", "ttfat_ms"),
    ("TPOT", "tpot_ms"),
    ("ITL", "itl_ms"),
    ("E2E", "e2e_ms"),
)
_SCHEDULED_ROWS = (
    ("TTFT from scheduled", "ttft_from_scheduled_ms"),
    ("E2E from scheduled", "e2e_from_scheduled_ms"),
    ("client queue", "queue_ms"),
)


def _latency_table(summary: dict[str, Any], rows: tuple[tuple[str, str], ...], title: str) -> Table:
    """Mean, the shown percentiles (each with its 95 % interval on a dim row below), max and n."""
    table = Table(title=title, title_justify="left", expand=False, pad_edge=False)
    table.add_column("metric", style="bold")
    for col in ("mean", *percentile_names(summary), "max"):
        table.add_column(col, justify="right", overflow="fold")  # an interval wraps, never cut
    table.add_column("n", justify="right", style="dim")
    for label, key in rows:
        dist = summary.get(key) or {}
        if not dist.get("n"):
            continue
        points = percentile_points(summary, key)
        cells = [Text(_fmt(dist.get("mean")))]
        for point in points:
            text = _fmt(point["value"])
            cells.append(Text(f"~{text}", style="yellow") if point["low_sample"] else Text(text))
        table.add_row(label, *cells, Text(_fmt(dist.get("max"))), str(dist["n"]))
        table.add_row(Text("  ci95", style="dim"), "", *(_ci_cell(p["ci95"]) for p in points), "", "")
    return table


def _ci_cell(ci: Any) -> Text:
    """The interval, dim: [11.9, 13.0] (on a narrow terminal it wraps at its space)."""
    return Text(interval(ci), style="dim")


def render(result: dict[str, Any], console: Console) -> None:
    cond, summary = result["conditions"], result["summary"]
    load = cond["load"]
    wl = cond["workload"]
    if load["mode"] == "closed_loop":
        mode = f"closed loop, concurrency {load['concurrency']}"
    else:
        mode = f"open loop, {load['rate']:g} req/s {load['arrival']}"
        if load.get("burstiness"):
            mode += f" (burstiness {load['burstiness']:g})"
        if load.get("max_concurrency"):
            mode += f", cap {load['max_concurrency']}"
    counts = summary["counts"]
    header = Text.assemble(
        (f"{cond['model']}", "bold cyan"),
        " @ ",
        cond["endpoint"],
        (_simulated(cond), "yellow"),
        "  ",
        (f"run {result['run_id']}", "dim"),
        "\n",
        f"{mode} | input {wl['input_len']['spec']} tok | output {wl['output_len']['spec']} tok | "
        f"{counts['sent']} requests"
        + (f" (+{load['warmup']} warm-up)" if load["warmup"] else "")
        + f" | seed {cond['seed']} | {cond['api']}{'' if cond['stream'] else ' (no stream)'} | "
        f"temperature {cond['sampling']['temperature']:g}",
    )
    parts: list[Any] = [header, Text()]
    parts.append(_latency_table(summary, _LATENCY_ROWS, "Latency (ms)"))
    queue = summary.get("queue_ms") or {}
    if load["mode"] == "open_loop" and queue.get("n"):
        parts.append(
            _latency_table(summary, _SCHEDULED_ROWS, "Open loop: latency from the scheduled send time (ms)")
        )
    parts += workload_view.tables(summary)  # length bins, turns, cold/warm prefix (issue 7)
    sections = [_throughput(summary), _outcomes(summary), _network(result), _server(result), _gpu(result)]
    sections.append(_client(result))
    parts.extend(_hanging(p) for p in sections if p is not None)
    notes = _notes(result)
    if notes:
        parts.append(notes)
    title = "tokenpace bench" + ("  [INTERRUPTED]" if result.get("interrupted") else "")
    border = "red" if not result["valid"] else "green"
    parts = [whole(p) if isinstance(p, Table) else p for p in parts]
    console.print(Panel(Group(*parts), title=title, border_style=border, expand=False))


def _throughput(s: dict[str, Any]) -> Text:
    text = Text.assemble(
        ("Throughput  ", "bold"),
        f"{s['request_throughput']:.2f} req/s | {s['output_token_throughput']:,.1f} output tok/s | "
        f"{s['total_token_throughput']:,.1f} total tok/s",
    )
    if s.get("per_user_output_token_throughput"):
        text.append(f" | {s['per_user_output_token_throughput']:.1f} tok/s per user (1/TPOT P50)")
    text.append(f" | window {s['window_s']:.1f} s")
    steady = s.get("steady") or {}
    if steady.get("request_throughput") is not None:
        ramp, drain = steady["excluded_ramp_up_s"], steady["excluded_drain_s"]
        text.append(
            f"\n            steady state {steady['request_throughput']:.2f} req/s over "
            f"{steady['window_s']:.1f} s (ramp-up {ramp:.1f} s and drain {drain:.1f} s left out)"
        )
    if steady.get("short"):
        text.append(f"\n            short run: {steady['short_reason']}", style="yellow")
    if s.get("goodput") is not None:
        slo = ", ".join(f"{k[:-3]} <= {v:g} ms" for k, v in s["slo"].items())
        text.append(
            Text.assemble(
                "\n",
                ("Goodput     ", "bold"),
                f"{s['goodput']:.2f} req/s met every SLO ({slo}): {s['goodput_ratio']:.1%} of requests",
            )
        )
        if s.get("goodput_latency_from") == "scheduled":  # open loop: what users arriving on schedule felt
            text.append(
                f", latency from the scheduled time (from the send: {s['goodput_from_send']:.2f} req/s, "
                f"{s['goodput_ratio_from_send']:.1%})"
            )
    elif s.get("goodput_unjudged"):
        text.append(
            Text.assemble("\n", ("Goodput     ", "bold"), ("not judged: ", "yellow"), s["goodput_unjudged"])
        )
    return text


def _outcomes(s: dict[str, Any]) -> Text:
    counts = s["counts"]
    parts = [f"{counts['sent']} sent", f"{counts['ok']} ok"]
    parts += [f"{v} {k}" for k, v in counts.items() if k not in ("sent", "ok") and v]
    style = "red" if s["error_rate"] > 0 else ""
    text = Text.assemble(
        ("Outcomes    ", "bold"),
        ", ".join(parts),
        " | ",
        (f"error rate {s['error_rate']:.1%}", style),
        f", timeouts {s['timeout_rate']:.1%}, streams cut short {s['interrupted_rate']:.1%}",
    )
    for reason, n in list(s.get("errors", {}).items())[:5]:
        text.append(f"\n            {n} x {reason}", style="red")
    return text


def _network(result: dict[str, Any]) -> Text | None:
    net = result["summary"].get("network") or {}
    if not net.get("new_connections") and not result.get("connect_probe"):
        return None
    text = Text.assemble(("Network     ", "bold"))
    if net.get("new_connections"):
        phases = " / ".join(
            f"{name} {_fmt(net[key]['p50'], 2)}"
            for name, key in (("DNS", "dns_ms"), ("TCP", "tcp_ms"), ("TLS", "tls_ms"))
            if net[key].get("n")
        )
        text.append(f"{net['new_connections']} new connections ({phases} ms P50)")
        cold, warm = net["ttft_cold_ms"], net["ttft_warm_ms"]
        if cold.get("n") and warm.get("n"):
            text.append(f" | TTFT P50 cold {_fmt(cold['p50'])} vs warm {_fmt(warm['p50'])} ms")
    probe = result.get("connect_probe")
    if probe and probe["rtt_ms"].get("n"):
        text.append(
            f" | connect probe RTT P50 {_fmt(probe['rtt_ms']['p50'], 2)} ms "
            f"(P95 {_fmt(probe['rtt_ms']['p95'], 2)}, {probe['failures']} failed)"
        )
    return text


WARM_CACHE = 0.9  # a prefix-cache hit rate from which most prompts skipped their prefill


def _server(result: dict[str, Any]) -> Text | None:
    server = result.get("server_metrics")
    if not server:
        return None
    text = Text.assemble(("Server      ", "bold"), _metrics_source(result, server))
    dec = server.get("decomposition")
    if dec:
        text.append("\n            " + _decomposition(dec))
    series = server.get("series") or {}
    peaks = [
        f"{name} max {max(v for _, v in series[name]):.3g}"
        for name in ("running", "waiting", "kv_usage")
        if series.get(name)
    ]
    if peaks:
        text.append("\n            " + ", ".join(peaks))
    hit_rate = (result["summary"].get("server") or {}).get("prefix_hit_rate")
    if hit_rate is not None:  # compare warns when two runs differ in it: show it where it is measured
        warm = ": TTFT here is a warm-cache figure" if hit_rate >= WARM_CACHE else ""
        text.append(f"\n            prefix-cache hit rate {hit_rate:.0%}{warm}")
    return text


def _gpu(result: dict[str, Any]) -> Text | None:
    lines = gpu_lines(result)
    if not lines:
        return None
    return Text.assemble(("GPU         ", "bold"), "\n            ".join(lines))


def _decomposition(dec: dict[str, Any]) -> str:
    split = ""
    if dec.get("engine_queue_mean_ms") is not None and dec.get("engine_prefill_mean_ms") is not None:
        split = (
            f" (queue {_fmt(dec['engine_queue_mean_ms'])} + prefill {_fmt(dec['engine_prefill_mean_ms'])})"
        )
    if dec.get("streamed") is False:  # the first token came with the whole response: decode is in it
        e2e = _fmt(dec["client_e2e_mean_ms"])
        line = f"no streaming: no TTFT decomposition (client TTFT is E2E, mean {e2e} ms)"
        if dec.get("network_and_client_ms") is not None:
            return line + (
                f"; E2E = engine {_fmt(dec['engine_e2e_mean_ms'])} + network and client "
                f"{_fmt(dec['network_and_client_ms'])} ms"
            )
        return (
            line
            + f"; engine TTFT {_fmt(dec['engine_ttft_mean_ms'])}{split} ms, the rest is decode and network"
        )
    return (
        f"TTFT mean {_fmt(dec['client_ttft_mean_ms'])} ms = engine {_fmt(dec['engine_ttft_mean_ms'])}{split} "
        f"+ network and client {_fmt(dec['network_and_client_ms'])} ms"
    )


def _client(result: dict[str, Any]) -> Text:
    c = result["summary"]["client"]
    lag = c["dispatch_lag_ms"]
    loop = c["loop_lag_ms"]
    text = Text.assemble(("Client      ", "bold"))
    if lag.get("p50") is not None and result["conditions"]["load"]["mode"] == "open_loop":
        text.append(f"dispatch lag P50 {_fmt(lag['p50'], 2)} / P99 {_fmt(lag['p99'], 2)} ms | ")
    text.append(
        f"loop lag P50 {_fmt(loop['p50'], 2)} / P99 {_fmt(loop['p99'], 2)} ms | "
        f"CPU {c['cpu_fraction']:.0%} of a core"
    )
    if c.get("cpu_us_per_chunk"):
        text.append(f" ({c['cpu_us_per_chunk']:.0f} us/chunk)")
    text.append(f" | memory {c['max_rss_mb']:.0f} MB")
    if c.get("workers"):  # the worst worker's numbers; each worker's own are in the JSON
        text.append(f" | worst of {len(c['workers'])} worker processes")
    impact = (c.get("stalls") or {}).get("impact")
    if impact and impact["held"]:  # what the client's own stalls did to the requests
        text.append(
            f"\n            stalls held {impact['held']} of {impact['requests']} requests "
            f"({impact['share']:.1%}, tolerated {impact['tolerance']:.0%}); longest stall "
            f"{impact['longest_stall_ms']:.0f} ms, at most {impact['most_added_ms']:.0f} ms added to one"
        )
    if result["valid"]:
        text.append("\n            VALID: the client kept up with the load asked", style="green")
    else:
        text.append("\n            NOT VALID for the load asked:", style="bold red")
        for reason in result["invalid_reasons"]:
            text.append(f"\n            - {reason}", style="red")
    return text


def _notes(result: dict[str, Any]) -> Text | None:
    lines = list(result.get("warnings") or [])
    s = result["summary"]
    if any((s.get(k) or {}).get("low_sample") for k, _ in (("ttft_ms", 0), ("e2e_ms", 0))):
        lines.append(
            "~ marks a percentile with fewer than 5 samples beyond it: "
            "treat it as noise (its ci95 row shows how wide it is)"
        )
    template = _template_note(s.get("prompt_tokens_check") or {})
    if template:
        lines.append(template)
    src = s["tokens"]["output_sources"]
    if src:
        lines.append(_output_token_sources(src))
    if result.get("stop_reason") and result["stop_reason"] != "completed":
        lines.append(f"stopped: {result['stop_reason']}")
    if not lines:
        return None
    return Text("\n".join(f"note: {line}" for line in lines), style="dim")


def _template_note(check: dict[str, Any]) -> str:
    """Information, not a warning: the server counts a chat template's tokens that were not asked."""
    overhead = check.get("template_overhead_tokens")
    if not overhead or check.get("mismatch"):
        return ""
    return (
        f"prompt tokens: the server counted {overhead} more per request than asked, the same on every "
        "request: what a chat template adds around a prompt (role markers); the rest matches"
    )


def _output_token_sources(src: dict[str, int]) -> str:
    """Where the output token counts came from, as a sentence."""
    said = {"server": "the server's usage report", "chunks": "one per streamed chunk (no usage report)"}
    parts = [f"{n} request{'s' if n != 1 else ''} from {said.get(k, k)}" for k, n in src.items()]
    return "output tokens counted: " + ", ".join(parts)


def _simulated(cond: dict[str, Any]) -> str:
    """Said in the header when the engine is tokenpace's own simulator, not a real one."""
    target = str(cond.get("target") or "")
    if not target.startswith("sim:"):
        return ""
    return f" (tokenpace's simulated engine, profile {target[4:]})"


def _metrics_source(result: dict[str, Any], server: dict[str, Any]) -> str:
    engine, scrapes = server["engine"], server["scrapes"]
    if str(result["conditions"].get("target") or "").startswith("sim:"):
        return f"the simulator's {engine}-style /metrics, {scrapes} scrapes"
    if engine == "tokenpace-gateway":
        return (
            f"tokenpace gateway /metrics, {scrapes} scrapes: a proxy, so no engine view here "
            "(give the gateway's upstreams metrics=URL, or bench the engine directly)"
        )
    if engine == "unknown":
        return (
            f"/metrics answered ({scrapes} scrapes) with no engine metrics tokenpace knows (a proxy "
            "such as tokenpace gateway?): no engine view; raw series in RESULT.server-metrics.jsonl"
        )
    return f"{engine} /metrics, {scrapes} scrapes"


_LABEL = 12  # "Throughput  ": the width of a section's label


def _hanging(section: Text) -> Table:
    """A labelled section whose long lines wrap under the text, not under the label."""
    lines = section.split("\n")
    label = lines[0][:_LABEL]
    rest = [line[_LABEL:] if line.plain[:_LABEL].isspace() else line for line in lines[1:]]
    body = Text("\n").join([lines[0][_LABEL:], *rest])
    grid = Table.grid()
    grid.add_column(width=_LABEL, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(label, body)
    return grid
