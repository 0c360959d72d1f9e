"""docs/playbook.md, run as written: every ```sh block in order, in one shell, against the simulator.

The blocks share one bash process (background engines and gateway keep their $! variables), in an
empty folder with its own store. Ports 8000-8002, 8089 and 9000 are swapped for free ones. Each block's
output and exit status are checked; the outputs shown in the doc are trimmed real runs of these
blocks (PLAYBOOK_CAPTURE=DIR writes each block's full output to DIR to refresh them).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from docs.samples import SAMPLES, documented, matches, shape
from tokenpace.testing.chromium import capture_charts, chromium_path
from tokenpace.testing.procs import SETUP_NICE, SETUP_STALL_TOLERANCE, STALL_TOLERANCE_ENV, free_port, renice

DOC = Path(__file__).resolve().parents[2] / "docs" / "playbook.md"
README = DOC.parents[1] / "README.md"
IMAGES_SCRIPT = DOC.parents[1] / "scripts" / "playbook_images.py"
PORTS = ("8000", "8001", "8002", "9000", "8089")
MARK = "@@playbook-block"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

# What each block must print (regular expressions), in order: a block that ran but printed the wrong
# thing fails here. Bench and sweep may exit 3 (NOT VALID) when this busy machine stalls the client.
EXPECTED = [
    ("export TOKENPACE_STORE", []),
    ("--out first.json", ["VALID", "By length bin", "Goodput", r"bench exit [03]\n"]),
    ("python3 -", ["95% interval of P95", "goodput"]),
    ("tokenpace sweep", ["Knee:", r"Figures rest on step\(s\)", "Safe watermark", r"sweep exit [03]\n"]),
    ("tokenpace plan", ["Replicas for a peak of 300 req/s"]),
    ("tokenpace report", ["html: report.html"]),
    ("baseline set", ["baseline release-1.0 = run"]),
    # the same build: PASS, or undecided on a busy host (test_the_same_build_is_never_called_regressed)
    ("gate.sh", [r"gate exit [05]\n", "ttft.p95"]),
    ("tokenpace history", [r"shift \+"]),
    ("GIT_SHA=1.2", ["ttft.p95"]),
    # the console leaves NOT VALID runs out of the fit: a busy host's stalled night leaves too few
    ("tokenpace ui", [r"P50 TTFT( shifted \+\d.* \(run \w+\)|: too few valid runs)"]),
    ("tokenpace scenarios", ["voice", "batch-summarisation"]),
    ("tokenpace select", ["assistant", "recommendation"]),
    ("tokenpace ab", ["TTFT", "per block"]),
    ("--emit-rules", ["wrote deploy/tokenpace-gateway-rules.yml"]),
    ("promtool", ["SUCCESS"]),
    ("weight=19", [r'requests_total\{api="chat",arm="b"', "arms exit 5\n", "VERDICT: HOLD.*different loads"]),
    ("ramp=2s", ['"accepted": 1', "sample ratio", "arms exit 1\n", "VERDICT: ROLL BACK"]),
    ("--upstream b=http://127.0.0.1:8000/v1,version=1.2 --slo", ["Llama-3.1-8B"]),
    ("upstreams.json", ["a: client TTFT", "b: client TTFT"]),
    ("--network cloud-same-region", ["Server", "network and client"]),
]


def sh_blocks(text: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == "sh"]


def with_ports(block: str, ports: dict[str, str]) -> str:
    for old, new in ports.items():
        block = re.sub(rf"(?<=[:\s]){old}\b", new, block)
    return block


def run_blocks(blocks: list[str], cwd: Path) -> list[tuple[int, str]]:
    """Every block in one bash, in order; each block's output and the status of its last command.
    Its runs measure what the walkthrough then judges, so they run as a test's setup runs (procs:
    ahead of CPU-bound neighbours where allowed, tolerating stalls on half the requests)."""
    script = "".join(f'echo {MARK}\n{b}\necho "{MARK}-rc $?"\n' for b in blocks)
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ) | {"PATH": f"{bindir}:{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    env.pop("TOKENPACE_STORE", None)
    env[STALL_TOLERANCE_ENV] = SETUP_STALL_TOLERANCE
    proc = subprocess.Popen(
        ["bash", "-c", script], cwd=cwd, env=env, text=True, preexec_fn=lambda: renice(SETUP_NICE),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=400)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what the doc started in the background
            os.killpg(proc.pid, signal.SIGTERM)
    results = []
    for part in out.split(f"{MARK}\n")[1:]:
        body, _, rc = part.rpartition(f"{MARK}-rc ")
        results.append((int(rc.split()[0]), body))
    return results


@pytest.fixture(scope="module")
def playbook_run(tmp_path_factory) -> tuple[list[str], list[tuple[int, str]], Path]:
    for tool in ("curl", "promtool"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make test installs it: scripts/system-packages.txt)")
    ports = {p: str(free_port()) for p in PORTS}
    blocks = sh_blocks(DOC.read_text(encoding="utf-8"))
    cwd = tmp_path_factory.mktemp("playbook")
    results = run_blocks([with_ports(b, ports) for b in blocks], cwd)
    capture = os.environ.get("PLAYBOOK_CAPTURE")
    if capture:
        Path(capture).mkdir(parents=True, exist_ok=True)
        for i, (rc, body) in enumerate(results):
            Path(capture, f"{i:02d}.txt").write_text(f"# rc {rc}\n{blocks[i]}\n{body}", encoding="utf-8")
    return blocks, results, cwd


def test_every_playbook_block_runs_and_shows_what_the_doc_says(playbook_run):
    blocks, results, _ = playbook_run
    assert len(results) == len(blocks) == len(EXPECTED), [b.splitlines()[0] for b in blocks]
    for block, (rc, out), (key, phrases) in zip(blocks, results, EXPECTED, strict=True):
        assert key in block, (key, block)
        assert rc == 0, f"block exited {rc}:\n{block}\n{out}"
        assert "Traceback" not in out, out
        for phrase in phrases:
            assert re.search(phrase, out), f"{phrase!r} not in the output of:\n{block}\n{out}"


def test_the_silent_regression_is_found_by_history_and_by_the_gate(playbook_run):
    _, results, _ = playbook_run
    out = {key: body for (key, _), (_, body) in zip(EXPECTED, results, strict=True)}
    shift = re.search(r"shift \+(\d+\.\d)%", out["tokenpace history"])
    assert shift and 4.0 <= float(shift.group(1)) <= 12.0, out["tokenpace history"]
    gate = out["GIT_SHA=1.2"]
    # the 8 % slowdown against a 5 % gate: regressed, or (an interval reaching back over 5 % on a
    # noisy run) undecided with how many runs would decide; never a pass
    regressed = "REGRESSED" in gate and "gate exit 1" in gate
    undecided = "UNDECIDED" in gate and "gate exit 5" in gate and "would decide" in gate
    assert regressed or undecided, gate


def test_the_same_build_is_never_called_regressed(playbook_run):
    """The gate on the build the baseline measured passes (the doc's run); on a busy host the noise
    between runs can widen an interval over the 5 % line: undecided, saying what would decide it."""
    _, results, cwd = playbook_run
    out = {key: body for (key, _), (_, body) in zip(EXPECTED, results, strict=True)}
    gate = json.loads((cwd / "gate-1.1.json").read_text())
    outcomes = {c["check"]: c["outcome"] for c in gate["checks"]}
    assert set(outcomes.values()) <= {"pass", "undecided"}, gate["checks"]
    if gate["outcome"] == "pass":
        assert "PASS: no regression" in out["gate.sh"] and "gate exit 0" in out["gate.sh"]
    else:
        assert gate["outcome"] == "undecided" and "gate exit 5" in out["gate.sh"], out["gate.sh"]
        reasons = [c["reason"] for c in gate["checks"] if c["outcome"] == "undecided"]
        decides = re.compile("would decide|to decide|too few samples")
        assert reasons and all(decides.search(r) for r in reasons), reasons


def test_the_playbooks_samples_have_the_shape_of_its_own_run(playbook_run):
    """Each sample the playbook shows (tests/docs/samples.py) against the output of the block above
    it in this run: rows, labels and sections, figures masked."""
    blocks, results, _ = playbook_run
    shown = documented("docs/playbook.md")
    for name, sample in SAMPLES.items():
        if sample.doc != "docs/playbook.md":
            continue
        pairs = zip(blocks, results, strict=True)
        (out,) = [body for block, (_, body) in pairs if sample.playbook_block in block]
        if re.search(r"exit 3\n", out):
            continue  # NOT VALID on a busy host: the panel says so in lines a valid run has not
        assert matches(shown[name], out, sample.kind), (
            f"the playbook's sample {name} is stale (run scripts/doc_samples.py):\n"
            f"shown: {shape(shown[name], sample.kind)}\nprinted: {shape(out, sample.kind)}"
        )


def test_the_playbook_is_linked_at_the_top_of_the_readme_and_its_pictures_are_small():
    head = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "docs/playbook.md" in head
    text = DOC.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+\.png)\)", text)
    assert len(images) >= 2
    for rel in images:
        png = (DOC.parent / rel).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and 5_000 < len(png) < 150_000, (rel, len(png))
    for block in re.findall(r"^```text\n(.*?)^```", text, re.S | re.M):
        assert "OUTPUT:" not in block, "a placeholder is left in the doc"


def test_the_pictures_are_taken_from_the_playbooks_own_report(playbook_run, tmp_path):
    """make playbook-images' capture, on the report step 2 wrote: every chart it names is found and small."""
    if chromium_path() is None:
        pytest.skip("chromium is not installed (make test installs it: scripts/system-packages.txt)")
    *_, cwd = playbook_run
    spec = importlib.util.spec_from_file_location("playbook_images", IMAGES_SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    charts = {title: tmp_path / name for title, name in script.CHARTS.items()}
    shown = re.findall(r"\(img/([^)]+\.png)\)", DOC.read_text(encoding="utf-8"))
    assert set(script.CHARTS.values()) | set(script.CONSOLE.values()) == set(shown)
    asyncio.run(capture_charts(cwd / "report.html", charts))
    for png in charts.values():
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 5_000 < len(data) < script.LIMIT_BYTES, (png, len(data))
