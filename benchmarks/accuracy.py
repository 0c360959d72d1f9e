"""How accurate and how cheap is tokenpace's client? Measured against a server whose truth is known.

    .venv/bin/python benchmarks/accuracy.py            # full run, ~3-4 min on 2 cores; updates BENCHMARKS.md
    .venv/bin/python benchmarks/accuracy.py --quick    # ~40 s smoke run; prints the table only

For every scenario and client, a fresh scripted server (benchmarks/truth_server.py: first token
50 ms after the request is read, then one token chunk every 10 ms, 64 tokens, each chunk stamped
with the server's perf_counter_ns) runs pinned to core 0 and one client process
(benchmarks/client_proc.py) runs pinned to core 1. Both clocks are CLOCK_MONOTONIC on one machine,
so the client's timestamps can be compared with the server's send times directly:

- TTFT error      = client first-token timestamp - server send time of the first token chunk
                    (the receive side)
- send side       = server's read of the request - client send timestamp (the way in: connection
                    set-up, the request's bytes, the server noticing them)
- whole TTFT err  = client TTFT - server TTFT (first chunk written - request read): both sides,
                    so a delay on the way in cannot hide
- ITL error       = |client gap - server gap|, per gap between consecutive token chunks
- delivery delay  = client timestamp - server send time, for every token chunk
- CPU per token   = client process CPU (user + system) during the run / token chunks received

Clients: ``tokenpace`` (tokenpace's real BenchRun on uvloop), ``raw`` (asyncio streams + uvloop +
orjson, the floor) and ``aiohttp`` (the same on aiohttp); see benchmarks/refclients.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from accuracy_analysis import _join, analyze, first_wave
from accuracy_report import MD_PATH, _f, machine, markdown, update_md

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
SERVER_CPU, CLIENT_CPU = 0, 1


@dataclass(frozen=True)
class Scenario:
    key: str
    label: str
    requests: int
    concurrency: int | None = None
    rate: float | None = None


FULL = [
    Scenario("c1", "closed, 1 stream", 20, concurrency=1),
    Scenario("c16", "closed, 16 streams", 160, concurrency=16),
    Scenario("c64", "closed, 64 streams", 384, concurrency=64),
    Scenario("c256", "closed, 256 streams", 1024, concurrency=256),
    Scenario("p600", "Poisson 600 req/s, no cap", 1800, rate=600.0),
]
QUICK = [
    Scenario("c1", "closed, 1 stream", 5, concurrency=1),
    Scenario("c16", "closed, 16 streams", 32, concurrency=16),
    Scenario("c64", "closed, 64 streams", 128, concurrency=64),
    Scenario("c256", "closed, 256 streams", 256, concurrency=256),
    Scenario("p600", "Poisson 600 req/s, no cap", 600, rate=600.0),
]
ALL_CLIENTS = ("tokenpace", "raw", "aiohttp")


# --- processes ---
def _pinned(cpu: int):
    def pin() -> None:
        if cpu >= 0 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu})

    return pin


def _cpus() -> tuple[int, int]:
    """Server and client cores: 0 and 1 where the machine has them, else no pinning."""
    try:
        avail = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return -1, -1
    if len(avail) < 2:
        return -1, -1
    return avail[0], avail[1]


def _wait_rusage(proc: subprocess.Popen, timeout_s: float) -> tuple[int, Any, float]:
    """Waits for ``proc`` (killing it after ``timeout_s``); returns exit code, rusage, wall seconds."""
    t0 = time.perf_counter()
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, ru, time.perf_counter() - t0


class TruthServer:
    def __init__(self, workdir: Path, cpu: int, name: str, script: str = "truth_server.py") -> None:
        self.truth_path = workdir / f"truth-{name}.json"
        self.cpu = cpu
        self.script = script
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> TruthServer:
        self.proc = subprocess.Popen(
            [PY, str(HERE / self.script), "--truth", str(self.truth_path), "--cpu", str(self.cpu)],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line.strip():
            self.proc.kill()
            raise RuntimeError("truth server did not start")
        self.url = f"http://127.0.0.1:{int(line)}/v1"
        return self

    def stop(self) -> dict:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("truth server did not stop") from None
        self.proc.stdout.close()  # type: ignore[union-attr]
        return orjson.loads(self.truth_path.read_bytes())

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_client(kind: str, sc: Scenario, workdir: Path, cpus: tuple[int, int], profile: bool) -> dict:
    data, truth = _client_run(kind, sc, workdir, cpus, profile)
    out = analyze(data, truth)
    out["first_wave_ttft_ms"] = first_wave(data["records"], sc.concurrency)
    return out


def run_client_raw(kind: str, sc: Scenario, workdir: Path, cpus: tuple[int, int]) -> Any:
    """The client's records joined with the server's truth (benchmarks/client_tail.py pools them)."""
    data, truth = _client_run(kind, sc, workdir, cpus, False)
    return _join(data["records"], truth)


def _client_run(
    kind: str,
    sc: Scenario,
    workdir: Path,
    cpus: tuple[int, int],
    profile: bool,
    server_script: str = "truth_server.py",
) -> tuple[dict, dict]:
    out_path = workdir / f"{kind}-{sc.key}.json"
    with TruthServer(workdir, cpus[0], f"{kind}-{sc.key}", server_script) as server:
        cmd = [
            PY,
            str(HERE / "client_proc.py"),
            "--kind",
            kind,
            "--url",
            server.url,
            "--requests",
            str(sc.requests),
            "--prefix",
            f"{kind}-{sc.key}-",
            "--out",
            str(out_path),
            "--cpu",
            str(cpus[1]),
        ]
        cmd += ["--concurrency", str(sc.concurrency)] if sc.concurrency else ["--rate", str(sc.rate)]
        if profile:
            cmd += ["--profile", str(workdir / f"{kind}-{sc.key}.prof")]
        proc = subprocess.Popen(cmd, cwd=ROOT)
        rc, ru, wall = _wait_rusage(proc, timeout_s=120)
        truth = server.stop()
    if rc != 0:
        raise RuntimeError(f"{kind} client failed on {sc.key} (exit {rc})")
    data = orjson.loads(out_path.read_bytes())
    data["process"] = {"cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_mb": ru.ru_maxrss / 1024, "wall_s": wall}
    return data, truth


# --- start-up ---
def measure_startup(workdir: Path, cpus: tuple[int, int], reps: int) -> dict:
    exe = shutil.which("tokenpace", path=str(Path(PY).parent)) or str(Path(PY).parent / "tokenpace")

    def timed(cmd: list[str]) -> tuple[float, float]:
        quiet = subprocess.DEVNULL
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=quiet, stderr=quiet, preexec_fn=_pinned(cpus[1]))
        rc, ru, wall = _wait_rusage(proc, timeout_s=60)
        if rc != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {rc}")
        return wall, ru.ru_maxrss / 1024

    help_runs = [timed([exe, "--help"]) for _ in range(reps)]
    with TruthServer(workdir, cpus[0], "startup") as server:
        tiny = [
            exe,
            "bench",
            "--url",
            server.url,
            "--model",
            "tiny",
            "-c",
            "1",
            "-n",
            "1",
            "--input-len",
            "8",
            "--output-len",
            "1",
            "-q",
            "--out",
            str(workdir / "tiny.json"),
        ]
        tiny_runs = [timed(tiny) for _ in range(reps)]
        server.stop()

    def walls(runs: list[tuple[float, float]]) -> dict:
        return {"median": statistics.median(w for w, _ in runs), "max": max(w for w, _ in runs)}

    return {
        "help_s": walls(help_runs),
        "help_rss_mb": max(m for _, m in help_runs),
        "tiny_run_s": walls(tiny_runs),
        "tiny_run_rss_mb": max(m for _, m in tiny_runs),
        "reps": reps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short smoke run (~40 s), tokenpace and raw only")
    ap.add_argument("--clients", help=f"comma-separated subset of {','.join(ALL_CLIENTS)}")
    ap.add_argument("--only", help="comma-separated scenario keys (c1,c16,c64,c256,p600)")
    ap.add_argument("--profile", action="store_true", help="cProfile each tokenpace client run")
    ap.add_argument("--no-startup", action="store_true", help="skip the start-up timings")
    ap.add_argument("--write-md", action=argparse.BooleanOptionalAction, help="update BENCHMARKS.md")
    ap.add_argument("--render", type=Path, help="only re-render the table of this results JSON")
    ap.add_argument("--keep", type=Path, help="keep raw client outputs and server truth in this folder")
    ap.add_argument("--json", type=Path, help="results JSON (default: benchmarks/results/)")
    args = ap.parse_args()
    if args.render:
        table = markdown(orjson.loads(args.render.read_bytes()))
        if args.write_md:
            update_md(table)
        print(table)
        return
    scenarios = QUICK if args.quick else FULL
    if args.only:
        keep = set(args.only.split(","))
        scenarios = [s for s in scenarios if s.key in keep]
    clients = ["tokenpace", "raw"] if args.quick else list(ALL_CLIENTS)
    if args.clients:
        clients = args.clients.split(",")
    cpus = _cpus()
    if cpus[0] >= 0:
        os.sched_setaffinity(0, {cpus[0]})  # this process mostly waits; keep it off the client's core
    results: dict[str, Any] = {"machine": machine(), "quick": args.quick, "scenarios": []}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tp-accuracy-") as tmp:
        workdir = Path(tmp)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            workdir = args.keep
        for sc in scenarios:
            entry = {"key": sc.key, "label": sc.label, "requests": sc.requests, "clients": {}}
            for kind in clients:
                elapsed = time.perf_counter() - t0
                print(f"[{elapsed:6.1f}s] {sc.label}: {kind} ...", file=sys.stderr, flush=True)
                r = run_client(kind, sc, workdir, cpus, args.profile and kind == "tokenpace")
                entry["clients"][kind] = r
                print(
                    f"    TTFT err P50 {_f(r['ttft_err_ms']['p50'])} ms, ITL |err| P50 "
                    f"{_f(r['itl_abs_err_ms']['p50'])} ms, CPU {_f(r['cpu_us_per_token'], 0)} µs/token"
                    + (f", valid={r['valid']}" if kind == "tokenpace" else ""),
                    file=sys.stderr,
                    flush=True,
                )
            results["scenarios"].append(entry)
        if "tokenpace" in clients and not args.no_startup:
            print(f"[{time.perf_counter() - t0:6.1f}s] start-up timings ...", file=sys.stderr, flush=True)
            results["startup"] = measure_startup(workdir, cpus, reps=3 if args.quick else 5)
        if args.profile:
            prof_dir = HERE / "results" / "profiles"
            prof_dir.mkdir(parents=True, exist_ok=True)
            for p in workdir.glob("*.prof"):
                shutil.copy(p, prof_dir / p.name)
    results["machine"]["loadavg_after"] = os.getloadavg()
    results["elapsed_s"] = time.perf_counter() - t0
    table = markdown(results)
    json_path = args.json or HERE / "results" / ("accuracy-quick.json" if args.quick else "accuracy.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    write_md = args.write_md if args.write_md is not None else not args.quick
    if write_md:
        update_md(table)
    print(table)
    print(f"\nresults: {json_path}" + (f"; table written to {MD_PATH}" if write_md else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
