"""`tokenpace sim`: serve the simulated engine, list its profiles, or run a workload in virtual time."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from tokenpace.app.run.outputs import ExitStatus
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
    sys.exit(ExitStatus.REFUSED)


def _positive_duration(text: str) -> float:
    seconds = parsing.duration_s(text)
    if seconds <= 0:
        raise click.BadParameter(f"{text!r}: the duration must be positive")
    return seconds


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
    "--speed",
    type=click.Choice(["fast", "slow"]),
    default="fast",
    show_default=True,
    help="A calibrated profile of an engine seen at two speeds (--calibrate says so): run its slow one.",
)
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
@click.option(
    "--otlp-endpoint",
    default=None,
    help="Export engine spans (vLLM's llm_request with queue/prefill/decode) per finished request to "
    "this OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (needs the otlp extra).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Served: engine processes sharing the port (SO_REUSEPORT), each a replica of its own; a "
    "client on many cores then measures itself, not the simulator.",
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
    "--summary-only",
    is_flag=True,
    help="Virtual: keep no per-request records, only bounded streaming summaries per step (percentiles "
    "within 1 %); automatic past 1,000,000 expected requests.",
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
@click.option(
    "--force",
    is_flag=True,
    help="--calibrate: write the profile even when its fit fails the quality gate (marked: every "
    "prediction from it is undecided).",
)
@click.option(
    "--tolerance",
    default="10%",
    show_default=True,
    help="--validate: how far a prediction may be off and still be met (e.g. 10%, 0.15).",
)
@click.argument("runs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def sim(**o: Any) -> None:
    """Serve a simulated OpenAI-compatible LLM engine on the wall clock, or run a workload in virtual time."""
    from tokenpace.app.serving.sim_setup import describe_profiles, sim_setup

    if o["calibrate"] or o["validate"] or o["runs"]:
        _calibrate_or_validate(o)
        return
    if o["list_profiles"]:  # before a profile is set up: nothing it lists depends on --speed
        click.echo(describe_profiles())
        return
    try:
        profile, network, faults = sim_setup(o)
    except (ValueError, OSError) as e:  # a ProfileError is a ValueError
        _fail(str(e))
    if o["replicas"] > 1 and not o["virtual"]:
        _fail("--replicas is a virtual-time what-if: add --virtual (a served sim is one engine)")
    if o["workers"] > 1 and o["virtual"]:
        _fail("--workers serves several engine processes: in virtual time use --replicas")
    if o["predicted_sweep"] and not o["virtual"]:
        _fail("--predicted-sweep needs --virtual")
    if o["virtual"]:
        from tokenpace.cli.sim.sim_view import run_virtual_cli

        try:
            run_virtual_cli(o, profile, network)
        except ValueError as e:
            _fail(str(e))
        return
    from tokenpace.app.serving.sim_serving import SimRefused, serve_sim

    try:
        if o["workers"] > 1:
            from tokenpace.app.serving.sim_workers import serve_sim_workers

            args = (
                profile,
                network,
                faults,
                o["host"],
                o["port"],
                o["seed"],
                o["workers"],
                o["otlp_endpoint"],
            )
            serve_sim_workers(*args, say=click.echo)
        else:
            serve_sim(profile, network, faults, o["host"], o["port"], o["seed"], o["otlp_endpoint"])
    except SimRefused as e:
        _fail(str(e))


def _calibrate_or_validate(o: dict[str, Any]) -> None:
    from tokenpace.cli.sim.sim_calibrate_view import calibrate_cli, validate_cli

    try:
        if o["calibrate"] and o["validate"]:
            raise ValueError("give --calibrate or --validate, not both")
        if not (o["calibrate"] or o["validate"]):
            raise ValueError("run files are arguments of --validate PROFILE only")
        if o["speed"] == "slow":
            raise ValueError(
                "--speed slow runs a profile's slow speed; --calibrate finds the speeds and --validate "
                "judges each load at the speed it ran: drop --speed"
            )
        if o["calibrate"]:
            if o["runs"]:
                raise ValueError(
                    "--calibrate takes its runs as --calibrate FILE (repeat it), not as arguments"
                )
            calibrate_cli(o)
        else:
            validate_cli({**o, "tolerance": _share(o["tolerance"])})
    except (ValueError, OSError) as e:  # a ProfileError is a ValueError
        _fail(str(e))
    except (KeyError, TypeError, IndexError, ArithmeticError) as e:  # a file shaped unlike a run
        _fail(f"cannot read these runs as tokenpace sweeps or results ({type(e).__name__}: {e})")


def _share(text: str) -> float:
    """A share as 10% or 0.1; ValueError with the flag's name."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"--tolerance {text!r} is not a share (e.g. 10% or 0.1)") from None
    if not 0 < value < 10:
        raise ValueError(f"--tolerance {text!r} is not a share between 0 and 10 (e.g. 10%)")
    return value
