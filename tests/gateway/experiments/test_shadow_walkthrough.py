"""docs/shadow-traffic.md's commands, run as written (ports, URLs and the session replaced):
a candidate 80 ms slower to answer is mirrored for half the requests, and `compare` on the paired
table calls it slower, from the same requests."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from docs.test_doc_commands import _Server

from tokenpace.testing.procs import FINISHED, free_port, run_cli

DOC = Path(__file__).resolve().parents[3] / "docs" / "shadow-traffic.md"


def _doc_lines() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## Shadow traffic") :]
    start = section.index("```sh\n") + 6
    return [line for line in section[start : section.index("```\n", start)].splitlines() if line]


def test_shadow_walkthrough(tmp_path: Path):
    gateway_line, compare_line = _doc_lines()
    env = {"TOKENPACE_STORE": str(tmp_path / "runs.db")}
    prod = _Server(["sim", "--host", "127.0.0.1", "--port", "0"])
    cand = _Server(["sim", "--host", "127.0.0.1", "--port", "0", "--rtt-ms", "80"])
    try:
        line = gateway_line.replace("127.0.0.1:9000", f"127.0.0.1:{free_port()}")
        line = line.replace("http://127.0.0.1:8000/v1", prod.url).replace(
            "http://127.0.0.1:8001/v1", cand.url
        )
        gateway = _Server(shlex.split(line)[1:], env, tmp_path)
        try:
            done = run_cli(
                "bench", "--url", gateway.url, "-n", "60", "-c", "2", "--output-len", "8", "--no-store",
                "-q", "--out", "live.json", env=env, cwd=str(tmp_path),
            )  # fmt: skip
            assert done.returncode in FINISHED, done.stderr
        finally:
            assert gateway.stop() == 0, gateway.lines
        said = "".join(gateway.lines)
        assert "shadowing 50% of users to cand" in said
        session = re.search(r"as session ([0-9a-f]+)", said)
        assert session, said
        hint = re.search(r"live vs shadow on the same requests: (tokenpace compare .+)", said)
        assert hint and hint.group(1) == compare_line.replace("SESSION", session.group(1)), said
        args = shlex.split(compare_line.replace("SESSION", session.group(1)))[1:]
        shown = run_cli(*args, "--out", "cmp.json", env=env, cwd=str(tmp_path))
        assert shown.returncode == 0, shown.stderr
        assert "Paired on the same requests" in shown.stdout, shown.stdout
        paired = json.loads((tmp_path / "cmp.json").read_text())["paired"]
        assert 15 <= paired["pairs"] <= 45 and paired["live_unmatched"] == 60 - paired["pairs"]
        ttft = next(m for m in paired["metrics"] if m["metric"] == "ttft")
        assert ttft["verdict"] == "slower" and ttft["median_diff_ms"] > 40, ttft
    finally:
        prod.stop()
        cand.stop()
