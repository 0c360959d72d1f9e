"""The user's guide (docs/README.md): every page listed once, under one kind, links that lead
somewhere, and user pages written as docs, not lab notes (those live in docs/notes/ and BENCHMARKS.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from docs.doc_commands import ROOT

GUIDE = ROOT / "docs" / "README.md"
KINDS = ("Tutorial", "How-to", "Reference", "Explanation")
# Pages other branches add; the index names them before they arrive.
ARRIVING = {"exit-codes.md", "web-console.md", "gpu-telemetry.md"}
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
ANCHORED = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")
PROSE_WIDTH = 120
LAB_NOTES = re.compile(r"\bissues? \d+\b|\bnot done yet\b", re.I)


def _user_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = LINK.findall(body)
    return out


def _prose_lines(text: str) -> list[str]:
    lines, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and not line.lstrip().startswith("|"):
            lines.append(line)
    return lines


def test_every_page_is_in_the_guide_once_under_one_kind():
    sections = _sections(GUIDE.read_text(encoding="utf-8"))
    assert all(kind in sections for kind in KINDS), list(sections)
    listed = [link for kind in KINDS for link in sections[kind]]
    assert len(listed) == len(set(listed)), "a page listed under two kinds, or twice"
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= set(listed), f"pages missing from docs/README.md: {sorted(pages - set(listed))}"
    assert set(listed) - pages <= ARRIVING, sorted(set(listed) - pages)


def test_every_relative_link_leads_to_a_file():
    for page in [*_user_pages(), *sorted((ROOT / "docs" / "notes").glob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or Path(target).name in ARRIVING:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings."""
    found, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return found


def test_every_link_to_a_section_finds_its_heading():
    for page in [*_user_pages(), *sorted((ROOT / "docs" / "notes").glob("*.md"))]:
        for target, anchor in ANCHORED.findall(page.read_text(encoding="utf-8")):
            to = (page.parent / target).resolve() if target else page
            if to.name in ARRIVING or re.match(r"[a-z]+:", target):
                continue
            assert anchor in _anchors(to), f"{page.relative_to(ROOT)} links to {target}#{anchor}"


def test_user_pages_are_not_lab_notes():
    for page in _user_pages():
        prose = _prose_lines(page.read_text(encoding="utf-8"))
        long = [line[:60] for line in prose if len(re.sub(r"\(https?://\S+\)", "()", line)) > PROSE_WIDTH]
        assert not long, f"{page.relative_to(ROOT)}: prose lines over {PROSE_WIDTH} characters: {long}"
        notes = [line.strip()[:80] for line in prose if LAB_NOTES.search(line)]
        assert not notes, f"{page.relative_to(ROOT)}: issue numbers or unfinished work: {notes}"
