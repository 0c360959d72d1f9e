"""The `tokenpace ...` commands of README.md and docs/*.md, and how a test runs them on a laptop.

A command is every line of a ```sh, ```bash or bare ``` block that starts with `tokenpace` (or a
path ending in `/tokenpace`), with `\\` continuations joined and `# comments` dropped. Usage
synopses live in ```text blocks and are not commands.

What the examples name that a test cannot have (real endpoints, hour-long loads, runs stored by
someone else) is substituted as SUBSTITUTIONS says; everything else runs exactly as written.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
COMMAND_FENCES = {"sh", "bash", ""}

# (what the documented command says, what the test runs instead)
SUBSTITUTIONS: tuple[tuple[str, str], ...] = (
    (
        "the first URL ending in /v1 (http://127.0.0.1:8000/v1, http://gpu1:8000/v1, $URL, ...)",
        "simulator A, started by the test on 127.0.0.1",
    ),
    ("a second, different URL (--b, the second --upstream)", "simulator B"),
    ("-n / --requests / --num-prompts N above 20", "20 (8 per sweep step)"),
    ("bench, sweep, ab: --output-len (or none)", "--output-len 16"),
    ("--duration D", "2s"),
    ("sweep --concurrency ladder / --rate ladder", "its first two / last two steps"),
    ("sweep --auto", "-n 8 --auto-steps 2"),
    ("ab --blocks / --block-requests", "2 / 5"),
    ("RUN, RUN_A / RUN_B, SWEEP_ID", "runs and a sweep stored earlier in the test's throwaway store"),
    (
        "baselines prod, release-1.4; labels version=1.4.2, version=1.5.0, model=m, engine=vllm",
        "set on those runs",
    ),
    ("PROFILE, NAME (a simulator profile)", "llama-3.1-8b-h100"),
    ("an OTLP collector, http://127.0.0.1:4318/v1/traces", "a real OTLP/HTTP receiver started by the test"),
    (
        "traced.json, traces.jsonl (a traced bench result; the collector's spans)",
        "a bench the test ran against simulator A exporting to that receiver; its spans",
    ),
    (
        "predicted.json (a predicted sweep)",
        "written by the test: sim --virtual --rate 2,4,8 --input-len 1024 --output-len 256 --predicted-sweep",
    ),
    ("$GIT_SHA", "abc123"),
    (
        "sim (serving), gateway --listen: servers that run until stopped",
        "a free port; started, probed with one HTTP request, stopped with SIGINT (exit 0)",
    ),
)

# docs/sim-calibration.md's walkthrough shares these files from one command to the next
CALIBRATION_DOC = "docs/sim-calibration.md"
CALIBRATION_FILES = ("ladder.json", "conc.json", "held.json", "mine.toml", "predicted.json")

# Commands that a dedicated test already runs as written, as a sequence sharing files and a store
# (doc, a text the command holds ("" for every command of the doc), the test that runs it).
RUN_ELSEWHERE: tuple[tuple[str, str, str], ...] = (
    ("docs/selection.md", "", "tests/cli/selection/test_select_cmd.py"),
    ("docs/dialects.md", "", "tests/cli/test_dialects_docs.py"),
    ("docs/workers.md", "", "tests/cli/bench/test_workers_cli.py"),
    ("README.md", "bench --workers", "tests/cli/bench/test_workers_cli.py"),
    ("", "deploy/gateway.toml", "tests/cli/gateway/test_gateway_config.py"),
    ("docs/gateway.md", "--admin-listen", "tests/gateway/operations/test_admin.py"),
    ("docs/gateway.md", "--workers", "tests/gateway/lifecycle/test_workers.py"),
    ("docs/gateway-fleet.md", "", "tests/gateway/lifecycle/test_fleet_processes.py"),
    ("docs/gray-release.md", "--config gray.toml", "tests/gateway/experiments/test_gray_walkthrough.py"),
    (
        "docs/gray-release.md",
        "--gateway http://127.0.0.1:9100",
        "tests/gateway/experiments/test_gray_walkthrough.py",
    ),
    ("docs/gray-release.md", "arms --changes", "tests/gateway/experiments/test_gray_walkthrough.py"),
    ("docs/playbook.md", "", "tests/docs/test_playbook.py"),
    ("docs/shadow-traffic.md", "--mirror", "tests/gateway/experiments/test_shadow_walkthrough.py"),
    ("docs/tracing.md", "--otlp-sample", "tests/app/watch/test_traces_sampled.py"),
    ("docs/tracing.md", "--traces sampled-traces.jsonl", "tests/app/watch/test_traces_sampled.py"),
    ("docs/tracing.md", "--otlp-endpoint", "tests/app/watch/test_traces_end_to_end.py"),
    ("docs/tracing.md", "--traces traces.jsonl", "tests/app/watch/test_traces_end_to_end.py"),
    ("docs/shadow-traffic.md", "upstream=cand", "tests/gateway/experiments/test_shadow_walkthrough.py"),
    ("docs/web-console.md", "", "tests/cli/library/test_ui_docs.py"),
    ("docs/workloads.md", "captured.jsonl", "tests/app/baseline/test_replay_captured.py"),
    ("docs/workloads.md", "store:gateway_session", "tests/app/baseline/test_replay_captured.py"),
    ("docs/baselines.md", "--until-decided", "tests/app/jobs/test_check_until.py"),
    ("", "check --baseline", "tests/cli/library/test_check_docs.py"),
    ("docs/vllm.md", "--model", "tests/cli/vllm/test_vllm_dropin.py"),
    ("", "arms --since 1h --store runs.db --guard", "tests/gateway/experiments/test_gray_release.py"),
    *((CALIBRATION_DOC, f, "tests/app/calibration/test_sim_calibrate_docs.py") for f in CALIBRATION_FILES),
    ("docs/gpu-telemetry.md", "--gpu-metrics http://127.0.0.1:9400", "tests/cli/bench/test_gpu_docs.py"),
    ("docs/gpu-telemetry.md", "--gpu-metrics nvidia-smi", "tests/cli/bench/test_gpu_docs.py"),
    ("docs/exit-codes.md", "", "tests/docs/test_exit_codes_page.py"),
)

PROFILE = "llama-3.1-8b-h100"
COLLECTOR = "http://127.0.0.1:4318/v1/traces"  # an OTLP/HTTP collector's default, as the docs show it
_URL = re.compile(r"https?://[^\s,\"']+/v1")
_COUNT_FLAGS = {"-n", "--requests", "--num-prompts"}


@dataclass(frozen=True, slots=True)
class DocCommand:
    where: str  # "README.md:25"
    argv: tuple[str, ...]  # after `tokenpace`, as documented

    @property
    def subcommand(self) -> str:
        return self.argv[0] if self.argv else ""

    def run_elsewhere(self) -> str:
        """The test that runs this command, when another one does."""
        doc, line = self.where.split(":")[0], " ".join(self.argv)
        for where, holds, test in RUN_ELSEWHERE:
            if (not where or where == doc) and holds in line:
                return test
        return ""

    def is_server(self) -> bool:
        args = set(self.argv)
        if self.subcommand == "sim":
            return not args & {"--virtual", "--list-profiles", "--calibrate", "--validate"}
        return self.subcommand == "gateway" and not args & {"--emit-rules", "--check-config"}


def _command_lines(path: Path) -> list[tuple[int, str]]:
    lines, out, fence = path.read_text(encoding="utf-8").splitlines(), [], None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip() if fence is None else None
        elif fence in COMMAND_FENCES:
            start = i
            while stripped.endswith("\\") and i + 1 < len(lines):
                i += 1
                stripped = stripped[:-1].rstrip() + " " + lines[i].strip()
            out.append((start + 1, stripped))
        i += 1
    return out


def doc_commands() -> list[DocCommand]:
    found = []
    for path in DOCS:
        for number, line in _command_lines(path):
            words = shlex.split(line, comments=True)
            if words and (words[0] == "tokenpace" or words[0].endswith("/tokenpace")):
                found.append(DocCommand(f"{path.relative_to(ROOT)}:{number}", tuple(words[1:])))
    return found


@dataclass(frozen=True, slots=True)
class Bed:
    """What the test started: two simulators and the names the stored runs answer to."""

    url_a: str
    url_b: str
    run: str  # RUN (no baseline points at it)
    run_a: str
    run_b: str
    sweep_id: str  # SWEEP_ID
    collector: str = COLLECTOR  # an OTLP/HTTP receiver's URL, where the docs show COLLECTOR


def substitute(cmd: DocCommand, bed: Bed, free_port: int) -> list[str]:
    """The argv the test runs for a documented command (see SUBSTITUTIONS)."""
    urls: dict[str, str] = {}

    def url(match: re.Match[str]) -> str:
        sims = (bed.url_a, bed.url_b)
        return urls.setdefault(match.group(0), sims[min(len(urls), 1)])

    names = {
        "RUN": bed.run,
        "RUN_A": bed.run_a,
        "RUN_B": bed.run_b,
        "PROFILE": PROFILE,
        "NAME": PROFILE,
        "SWEEP_ID": bed.sweep_id,
        "$URL": bed.url_a,
        "$GIT_SHA": "abc123",
    }
    args = [
        bed.collector if a == COLLECTOR else _URL.sub(url, names.get(a, a).replace("$GIT_SHA", "abc123"))
        for a in cmd.argv
    ]
    args = _shrink(cmd.subcommand, args)
    if cmd.subcommand == "sim" and cmd.is_server():
        args = [*_drop_option(args, "--port"), "--host", "127.0.0.1", "--port", "0"]
    if cmd.subcommand == "gateway" and cmd.is_server():
        args = _set_option(args, "--listen", f"127.0.0.1:{free_port}")
    return args


def _shrink(sub: str, args: list[str]) -> list[str]:
    cap = 8 if sub == "sweep" else 20
    for i, a in enumerate(args[:-1]):
        nxt = args[i + 1]
        if a in _COUNT_FLAGS and nxt.isdigit() and int(nxt) > cap:
            args[i + 1] = str(cap)
        elif a == "--duration" and sub != "sim":
            args[i + 1] = "2s"
        elif sub == "sweep" and a == "--concurrency" and "," in nxt:
            args[i + 1] = ",".join(nxt.split(",")[:2])
        elif sub == "sweep" and a == "--rate" and "," in nxt:
            args[i + 1] = ",".join(nxt.split(",")[-2:])
    if sub in {"bench", "sweep", "ab"}:
        args = _set_option(args, "--output-len", "16")
    if sub == "bench" and not (set(args) & (_COUNT_FLAGS | {"--duration"})):
        args += ["-n", "20"]
    if sub == "sweep" and not (set(args) & (_COUNT_FLAGS | {"--duration"})):
        args += ["-n", "8"]
    if sub == "sweep" and "--auto" in args:
        args = _set_option(args, "--auto-steps", "2")
    if sub == "ab":
        args = _set_option(_set_option(args, "--blocks", "2"), "--block-requests", "5")
    return args


def _drop_option(args: list[str], flag: str) -> list[str]:
    if flag not in args:
        return args
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


def _set_option(args: list[str], flag: str, value: str) -> list[str]:
    return [*_drop_option(args, flag), flag, value]
