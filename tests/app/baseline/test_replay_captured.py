"""docs/workloads.md's capture-and-replay commands, run as written (ports and URLs replaced): traffic
with three shared prefixes goes through the gateway, and its replay against another engine keeps the
captured arrivals, lengths and prefix groups."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
from docs.test_doc_commands import _Server

from tokenpace.core.workload.length_fit import ks_distance
from tokenpace.core.workload.replay import trace_from_records
from tokenpace.testing.procs import FINISHED, free_port, run_cli

DOC = Path(__file__).resolve().parents[3] / "docs" / "workloads.md"


def _doc_lines() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## Replaying what the gateway captured") :]
    block = section[section.index("```sh\n") + 6 : section.index("```\n", section.index("```sh\n") + 6)]
    return [line for line in block.splitlines() if line.startswith("tokenpace ")]


def _ks(a: list[float], b: list[float]) -> tuple[float, float]:
    n, m = len(a), len(b)
    return ks_distance(np.array(a), np.array(b)), 1.36 * float(np.sqrt((n + m) / (n * m)))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_replay_of_captured_traffic_keeps_its_arrivals_lengths_and_prefixes(tmp_path: Path):
    gateway_line, replay_file, replay_store = _doc_lines()
    env = {"TOKENPACE_STORE": str(tmp_path / "runs.db")}
    prod, candidate = (_Server(["sim", "--host", "127.0.0.1", "--port", "0"]) for _ in range(2))
    try:
        port = free_port()
        line = gateway_line.replace("127.0.0.1:9000", f"127.0.0.1:{port}")
        line = line.replace("http://127.0.0.1:8000/v1", prod.url)
        gateway = _Server(shlex.split(line)[1:], env, tmp_path)
        try:
            traffic = run_cli(
                "bench", "--url", gateway.url, "--rate", "8", "-n", "40", "--input-len", "200:2000",
                "--output-len", "8:64", "--prefix-len", "600", "--prefixes", "3", "--seed", "7",
                "--no-store", "-q", "--out", "traffic.json", env=env, cwd=str(tmp_path),
            )  # fmt: skip
            assert traffic.returncode in FINISHED, traffic.stderr
        finally:
            assert gateway.stop() == 0, gateway.lines
        session = re.search(r"as session ([0-9a-f]+)", "".join(gateway.lines))
        assert session, gateway.lines
        captured = _records(tmp_path / "captured.jsonl")
        assert len(captured) == 40 and all(r["prompt_text"] is None for r in captured)  # no text kept

        def run(doc_line: str) -> list[dict]:
            args = shlex.split(doc_line.replace("http://127.0.0.1:8001/v1", candidate.url))[1:]
            args = [a.replace("SESSION", session.group(1)) for a in args]
            done = run_cli(*args, "--no-store", "-q", "--out", "replay.json", env=env, cwd=str(tmp_path))
            assert done.returncode in FINISHED, done.stderr
            return _records(tmp_path / "replay.records.jsonl")

        for doc_line, speedup in ((replay_file, 1), (replay_store, 2)):
            replayed = run(doc_line)
            assert len(replayed) == len(captured)
            # arrivals: the captured spacing, divided by the speed-up
            gaps = [np.diff(sorted(r["sent_ns"] for r in rs)) / 1e9 for rs in (captured, replayed)]
            ks, limit = _ks(list(gaps[0]), list(gaps[1] * speedup))
            assert ks <= limit, ("arrival gaps", ks, limit)
            for key in ("prompt_tokens", "output_tokens"):
                ks, limit = _ks([r[key] for r in captured], [r[key] for r in replayed])
                assert ks <= limit, (key, ks, limit)
            # each request's prompt as long as captured: no template counted twice, no salt on top
            by_time = [
                [r["prompt_tokens"] for r in sorted(rs, key=lambda r: r["sent_ns"])]
                for rs in (captured, replayed)
            ]
            # the gateway's records hold the server's count (the sim's chat template adds 7 tokens)
            # and characters too alike in tokens per character to fit the template: the replay says
            # so and sends the server's count; its own server adds its template once, no salt on top
            template = trace_from_records(captured).description["template_tokens"]
            extra = 0 if template["from"] != "unknown" else 7
            assert [b - a for a, b in zip(*by_time, strict=True)] == [extra] * len(captured)
            assert len({r["prefix_hashes"][0] for r in captured}) == 3
            assert len({r["prefix_id"] for r in replayed}) == 3
    finally:
        prod.stop()
        candidate.stop()
