"""Rewrite the sample outputs of README.md and docs/*.md from real runs against the simulator.

    PYTHONPATH=. .venv/bin/python scripts/doc_samples.py            # every sample
    PYTHONPATH=. .venv/bin/python scripts/doc_samples.py readme-bench

Each `<!-- sample: NAME -->` block gets what its source prints (tests/docs/samples.py names the
command, or the playbook block, behind each): README's commands run in a throwaway folder, the
playbook runs whole, as its test runs it. The throwaway folder's path is shown as `...`. A run that
is NOT VALID (a busy host) is retried, never written. tests/docs/test_samples.py and
tests/docs/test_playbook.py check that the blocks keep the shape of a real run.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from docs.samples import SAMPLES, help_text, replace  # noqa: E402
from docs.test_playbook import DOC as PLAYBOOK  # noqa: E402
from docs.test_playbook import PORTS, run_blocks, sh_blocks, with_ports  # noqa: E402
from docs.test_samples import NOT_VALID, run_sample  # noqa: E402

from tokenpace.testing.procs import free_port  # noqa: E402

TRIES = 3


def _command_output(command: str) -> str:
    for _ in range(TRIES):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = run_sample(command, Path(tmp))
            if rc == 0:
                return out.replace(tmp, "...")
            if rc != NOT_VALID:
                raise SystemExit(f"{command!r} exited {rc}:\n{out[-2000:]}")
    raise SystemExit(f"{command!r} was NOT VALID {TRIES} times: run it on a quieter host")


def _playbook_outputs() -> dict[str, str]:
    """The output of every playbook block a sample comes from, from one run of the whole page."""
    blocks = sh_blocks(PLAYBOOK.read_text(encoding="utf-8"))
    wanted = {s.playbook_block for s in SAMPLES.values() if s.playbook_block}
    for _ in range(TRIES):
        with tempfile.TemporaryDirectory() as tmp:
            ports = {p: str(free_port()) for p in PORTS}
            results = run_blocks([with_ports(b, ports) for b in blocks], Path(tmp))
            pairs = zip(blocks, results, strict=True)
            outs = {key: body.replace(tmp, "...") for b, (_, body) in pairs for key in wanted if key in b}
            if not any("exit 3\n" in out for out in outs.values()):
                return outs
    raise SystemExit(f"the playbook's bench was NOT VALID {TRIES} times: run it on a quieter host")


def main(names: list[str]) -> None:
    chosen = {n: SAMPLES[n] for n in names} if names else SAMPLES
    playbook = _playbook_outputs() if any(s.playbook_block for s in chosen.values()) else {}
    for name, sample in chosen.items():
        if sample.kind == "help":
            out = help_text(sample.command)
        elif sample.command:
            out = _command_output(sample.command)
        else:
            out = playbook[sample.playbook_block]
        out = "\n".join(line.rstrip() for line in out.strip("\n").splitlines())
        page = ROOT / sample.doc
        text = page.read_text(encoding="utf-8")
        new = replace(text, name, out)
        if new == text and f"<!-- sample: {name} -->" not in text:
            raise SystemExit(f"{sample.doc} has no sample {name}")
        page.write_text(new, encoding="utf-8")
        print(f"{sample.doc}: {name} ({len(out.splitlines())} lines)")


if __name__ == "__main__":
    unknown = [n for n in sys.argv[1:] if n not in SAMPLES]
    if unknown:
        raise SystemExit(f"unknown sample(s) {', '.join(unknown)}: one of {', '.join(SAMPLES)}")
    main(sys.argv[1:])
