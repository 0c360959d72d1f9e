"""make playbook-images (scripts/playbook_images.py), run into a temporary folder with a short sweep:
every picture docs/playbook.md shows is made, a PNG of the size the script states and under its
byte limit; the console's pictures are reached from the runs page in at most three clicks, the
second page saying when the nightly test's P95 TTFT shifted and by how much, with no page error."""

from __future__ import annotations

import importlib.util
import re
import struct
from pathlib import Path

import pytest

from tokenpace.testing.cdp_page import chromium_path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "playbook.md"
SCRIPT = ROOT / "scripts" / "playbook_images.py"
PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which a PNG holds first."""
    assert data[:8] == PNG and data[12:16] == b"IHDR", data[:16]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (scripts/system-packages.txt)")
def test_the_generator_makes_every_picture_the_playbook_shows(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("playbook_images", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    walk = script.build(tmp_path, quick=True)
    shown = re.findall(r"!\[[^\]]*\]\(img/([^)]+\.png)\)", DOC.read_text(encoding="utf-8"))
    assert set(shown) == set(script.CHARTS.values()) | set(script.CONSOLE.values())
    for name in shown:
        data = (tmp_path / name).read_bytes()
        width, height = png_size(data)
        assert 5_000 < len(data) < script.LIMIT_BYTES, (name, len(data))
        if name in script.CONSOLE.values():
            assert (width, height) == script.VIEWPORT, name
        else:  # a chart, clipped to its figure at 0.8 of a 900 px page
            assert 300 < width <= 720 and 200 < height < width, (name, width, height)
    assert walk["clicks"] <= 3 and walk["errors"] == []
    assert re.fullmatch(
        r"P95 TTFT shifted \+\d+\.\d% \[\+\S+, \+\S+\] on \d{4}-\d\d-\d\d \(run \w+\)", walk["headline"]
    )
