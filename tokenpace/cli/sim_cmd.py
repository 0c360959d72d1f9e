"""`tokenpace sim`: serve the simulated engine, list its profiles, or run a workload in virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from tokenpace.cli import parsing


class _OneLineErrors(click.Command):
    """Bad flags give one clear line on stderr and exit 2 (no usage dump)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            return _fail(e.format_message())


def _fail(message: str) -> NoReturn:
    click.echo(f"tokenpace sim: {message}", err=True)
    sys.exit(2)


def _positive_duration(text: str) -> float:
    seconds = parsing.duration_s(text)
    if seconds <= 0:
        raise click.BadParameter(f"{text!r}: the duration must be positive")
    return seconds


def _run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    uvloop.install()
    return asyncio.run(coro)


@click.command("sim", cls=_OneLineErrors)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0 picks a free one).",
)
@click.option(
    "--profile",
    "profile_name",
    default=None,
    help="Engine profile: a name (see --list-profiles) or a profile file, e.g. one from --calibrate.",
)
@click.option("--list-profiles", is_flag=True, help="List the profiles, their figures and sources, and exit.")
@click.option("--network", default=None, help="Network preset: local, lan, edge-wifi, cloud-same-region, ...")
@click.option("--rtt-ms", type=click.FloatRange(0), default=None, help="Round-trip time added per request.")
@click.option("--jitter-ms", type=click.FloatRange(0), default=None, help="Half-normal jitter on the RTT.")
@click.option("--chunked-prefill/--no-chunked-prefill", default=None, help="Override the profile.")
@click.option("--prefix-caching/--no-prefix-caching", default=None, help="Override the profile.")
@click.option(
    "--max-num-seqs",
    type=click.IntRange(1),
    default=None,
    help="Override the profile: most requests batched at once.",
)
@click.option(
    "--max-num-batched-tokens",
    type=click.IntRange(1),
    default=None,
    help="Override the profile: most tokens in one engine step.",
)
@click.option("--num-gpu-blocks", type=click.IntRange(1), default=None, help="Fixed KV capacity in blocks.")
@click.option(
    "--eos-prob",
    type=click.FloatRange(0, 1),
    default=None,
    help="Per-token probability of stopping early (ignore_eos disables it).",
)
@click.option(
    "--reasoning-tokens",
    type=click.IntRange(0),
    default=None,
    help="Stream this many reasoning tokens before each chat answer (a request's reasoning_tokens wins).",
)
@click.option(
    "--tokens-per-chunk",
    type=click.IntRange(1),
    default=None,
    help="Tokens per streamed chunk, as engines that batch their output send (default 1).",
)
@click.option(
    "--usage-every-chunk",
    is_flag=True,
    default=None,
    help="Put usage so far on every chunk (as vLLM's continuous_usage_stats), so clients see chunk sizes.",
)
@click.option("--served-model-name", default=None, help="Model name the API serves (default: the profile's).")
@click.option(
    "--faults",
    "faults_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="JSON file of fault settings (same names as the flags, with underscores).",
)
@click.option(
    "--fault-error-rate",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of requests answered with an error status.",
)
@click.option("--fault-error-codes", default=None, help="Comma-separated status codes, e.g. 500,503.")
@click.option(
    "--fault-429-rate",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of requests answered 429 Too Many Requests.",
)
@click.option("--retry-after", type=click.FloatRange(0), default=None, help="Retry-After seconds on 429.")
@click.option(
    "--fault-hang-rate",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of requests that never answer.",
)
@click.option(
    "--fault-cut-rate", type=click.FloatRange(0, 1), default=None, help="Share of streams cut off midway."
)
@click.option(
    "--fault-malformed-rate",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of streams with a malformed chunk.",
)
@click.option(
    "--cold-start", type=click.FloatRange(0), default=None, help="Seconds of slow steps after launch."
)
@click.option(
    "--cold-start-factor",
    type=click.FloatRange(1),
    default=None,
    help="How much slower steps are during --cold-start.",
)
@click.option("--no-fault-header", is_flag=True, help="Ignore the x-sim-fault request header.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the simulator's randomness (faults, lengths, arrivals).",
)
@click.option("--virtual", is_flag=True, help="Run a workload on the virtual clock instead of serving.")
@click.option(
    "--input-len",
    default="512",
    show_default=True,
    callback=lambda _c, _p, v: parsing.length(v),
    help="Virtual: as bench, e.g. 512, 256:1024, normal:512,128, lognormal:512,0.5, 128@3,2048@1.",
)
@click.option(
    "--output-len",
    default="128",
    show_default=True,
    callback=lambda _c, _p, v: parsing.length(v),
    help="Virtual: output length, same syntax.",
)
@click.option("--rate", default=None, help="Virtual: req/s; a comma list is a ladder (e.g. 1,2,4,8).")
@click.option("--concurrency", type=click.IntRange(1), default=None, help="Virtual: closed loop users.")
@click.option("--requests", type=click.IntRange(1), default=None, help="Virtual closed loop: total requests.")
@click.option(
    "--duration",
    default="60s",
    show_default=True,
    callback=lambda _c, _p, v: _positive_duration(v),
    help="Virtual: length of each ladder step (or of a closed loop without --requests), e.g. 90s, 5m; "
    "a bare number is seconds.",
)
@click.option(
    "--arrival",
    type=click.Choice(["poisson", "constant", "gamma"]),
    default="poisson",
    show_default=True,
    help="Virtual, open loop: how arrivals are spaced.",
)
@click.option(
    "--burstiness",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="Virtual, gamma arrivals: 1 = Poisson, <1 burstier.",
)
@click.option("--shared-prefix", type=click.IntRange(0), default=0, help="Virtual: tokens shared by all.")
@click.option(
    "--replicas",
    type=click.IntRange(1, 1024),
    default=1,
    show_default=True,
    help="Virtual: engines behind a random router, each taking its share of the load (a what-if).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Virtual: write summary and per-request results as JSON. --calibrate: the profile to write.",
)
@click.option(
    "--predicted-sweep",
    type=click.Path(dir_okay=False),
    default=None,
    help="Virtual: also write the steps as a sweep JSON marked predicted (tokenpace plan reads it).",
)
@click.option(
    "--calibrate",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Fit a profile to a sweep or bench result (repeatable: a concurrency sweep plus an "
    "input-length sweep); writes --out PROFILE.toml. --max-num-seqs sets a known scheduler limit.",
)
@click.option(
    "--validate",
    default=None,
    metavar="PROFILE",
    help="Replay held-out runs (the RUN arguments) on PROFILE in virtual time: predicted vs measured.",
)
@click.argument("runs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def sim(**o: Any) -> None:
    """Serve a simulated OpenAI-compatible LLM engine on the wall clock, or run a workload in virtual time."""
    from tokenpace.sim.profile import ProfileError

    if o["calibrate"] or o["validate"] or o["runs"]:
        _calibrate_or_validate(o)
        return
    try:
        profile, network, faults = _build(o)
    except (ProfileError, ValueError, OSError) as e:
        _fail(str(e))
    if o["replicas"] > 1 and not o["virtual"]:
        _fail("--replicas is a virtual-time what-if: add --virtual (a served sim is one engine)")
    if o["predicted_sweep"] and not o["virtual"]:
        _fail("--predicted-sweep needs --virtual")
    if o["list_profiles"]:
        from tokenpace.sim.describe import describe_profiles

        click.echo(describe_profiles())
        return
    if o["virtual"]:
        from tokenpace.cli.sim_view import run_virtual_cli

        try:
            run_virtual_cli(o, profile, network)
        except ValueError as e:
            _fail(str(e))
        return
    _run(_serve(o, profile, network, faults))


def _calibrate_or_validate(o: dict[str, Any]) -> None:
    from tokenpace.cli.sim_calibrate_view import calibrate_cli, validate_cli
    from tokenpace.sim.profile import ProfileError

    try:
        if o["calibrate"] and o["validate"]:
            raise ValueError("give --calibrate or --validate, not both")
        if o["calibrate"]:
            if o["runs"]:
                raise ValueError(
                    "--calibrate takes its runs as --calibrate FILE (repeat it), not as arguments"
                )
            calibrate_cli(o)
        elif o["validate"]:
            validate_cli(o)
        else:
            raise ValueError("run files are arguments of --validate PROFILE only")
    except (ProfileError, ValueError, OSError) as e:
        _fail(str(e))


def _build(o: dict[str, Any]) -> tuple[Any, Any, Any]:
    from tokenpace.sim.faults import FaultConfig
    from tokenpace.sim.profile import Network, get_network, get_profile

    profile = get_profile(o["profile_name"])
    engine = {
        k: o[k]
        for k in (
            "chunked_prefill",
            "prefix_caching",
            "max_num_seqs",
            "max_num_batched_tokens",
            "num_gpu_blocks",
            "eos_prob",
            "reasoning_tokens",
            "tokens_per_chunk",
            "usage_every_chunk",
        )
        if o[k] is not None
    }
    extra: dict[str, Any] = {"engine": engine} if engine else {}
    if o["served_model_name"]:
        extra["served_model_name"] = o["served_model_name"]
    if extra:
        profile = profile.with_overrides(**extra)
    network = get_network(o["network"]) if o["network"] else profile.network
    if o["rtt_ms"] is not None or o["jitter_ms"] is not None:
        network = Network(
            rtt_ms=o["rtt_ms"] if o["rtt_ms"] is not None else network.rtt_ms,
            jitter_ms=o["jitter_ms"] if o["jitter_ms"] is not None else network.jitter_ms,
            name="custom",
        )
    flags: dict[str, Any] = {
        "error_rate": o["fault_error_rate"],
        "rate_limit_rate": o["fault_429_rate"],
        "retry_after_s": o["retry_after"],
        "hang_rate": o["fault_hang_rate"],
        "cut_rate": o["fault_cut_rate"],
        "malformed_rate": o["fault_malformed_rate"],
        "cold_start_s": o["cold_start"],
        "cold_start_factor": o["cold_start_factor"],
    }
    if o["fault_error_codes"]:
        try:
            flags["error_codes"] = tuple(int(c) for c in o["fault_error_codes"].split(","))
        except ValueError:
            raise ValueError(
                f"bad --fault-error-codes {o['fault_error_codes']!r}: use e.g. 500,503"
            ) from None
    if o["no_fault_header"]:
        flags["allow_header"] = False
    flags = {k: v for k, v in flags.items() if v is not None}
    flags["seed"] = o["seed"]
    faults = (
        FaultConfig.from_file(Path(o["faults_file"]), **flags) if o["faults_file"] else FaultConfig(**flags)
    )
    return profile, network, faults


async def _serve(o: dict[str, Any], profile: Any, network: Any, faults: Any) -> None:
    from tokenpace.sim.server import SimServer

    srv = SimServer(
        profile,
        host=o["host"],
        port=o["port"],
        faults=faults,
        network=network,
        seed=o["seed"],
    )
    try:
        await srv.start()
    except OSError as e:
        _fail(f"cannot listen on {o['host']}:{o['port']}: {e.strerror or e}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"tokenpace sim listening on {srv.url}\n")
    sys.stdout.flush()
    await stop.wait()
    await srv.stop()
