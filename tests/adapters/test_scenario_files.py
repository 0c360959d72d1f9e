"""The shipped scenarios parse; a user's file adds to them; a bad file is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenpace.adapters.scenario_files import default_book, load_book
from tokenpace.core.analysis.selection.scenarios import ScenarioError

DEFAULTS = {"voice", "chat", "code-completion", "rag-answer", "long-form", "batch-summarisation"}


def test_the_defaults_cover_the_documented_use_cases():
    book = default_book()
    assert set(book.scenarios) == DEFAULTS
    voice = book.scenarios["voice"]
    assert (voice.slos[0].metric, voice.slos[0].percentile, voice.slos[0].threshold_ms) == (
        "ttft",
        "p95",
        800,
    )
    assert book.scenarios["chat"].slos[0].threshold_ms == 1000
    for s in book.scenarios.values():
        assert (s.rate is None) != (s.concurrency is None)
        assert s.slos and s.input_len > 0 and s.output_len > 0


def test_a_user_file_adds_scenarios_and_prices_and_wins_a_shared_name(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        "[scenario.voice]\ninput_len = 100\noutput_len = 10\nconcurrency = 2\n"
        'slo = [{ metric = "e2e", percentile = "p99", threshold_ms = 50 }]\n'
        "[scenario.mine]\ninput_len = 1\noutput_len = 1\nrate = 1\n"
        'slo = [{ metric = "itl", threshold_ms = 5 }]\n'
        "[prices.gpu]\nhourly = 2.5\n"
    )
    book = load_book(f)
    assert book.scenarios["voice"].concurrency == 2 and book.sources["voice"] == str(f)
    assert book.scenarios["mine"].slos[0].percentile == "p95"  # the default percentile
    assert book.prices["gpu"].hourly == 2.5
    assert set(book.scenarios) == DEFAULTS | {"mine"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[scenario.x\n", "not valid TOML"),
        (
            "[scenario.x]\ninput_len=1\noutput_len=1\nrate=1\nconcurrency=2\nslo=[{metric='ttft',threshold_ms=1}]",
            "exactly one of rate",
        ),
        ("[scenario.x]\ninput_len=1\noutput_len=1\nrate=1\nslo=[]", "at least one slo"),
        (
            "[scenario.x]\ninput_len=1\noutput_len=1\nrate=1\nslo=[{metric='speed',threshold_ms=1}]",
            "slo metric",
        ),
        (
            "[scenario.x]\ninput_len=1\noutput_len=1\nrate=1\nslo=[{metric='ttft',threshold_ms=-1}]",
            "positive",
        ),
        (
            "[scenario.x]\ninput_len=1\noutput_len=1\nrate=1\nsloo=1\nslo=[{metric='ttft',threshold_ms=1}]",
            "unknown key",
        ),
        ("[prices.x]\nhourly=1\ninput_per_mtok=1", "not both"),
        ("[scenarios.x]\n", "unknown top-level"),
    ],
)
def test_a_bad_scenario_file_is_one_clear_error(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ScenarioError, match=message):
        load_book(f)


def test_a_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_book(tmp_path / "nope.toml")


def test_the_documented_defaults_table_matches_the_shipped_file():
    page = Path(__file__).resolve().parents[2] / "docs" / "selection-reference.md"
    doc = page.read_text(encoding="utf-8")
    table = doc.split("## The shipped scenarios", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    book = default_book()
    assert {r.split("`")[1] for r in rows} == set(book.scenarios)
    for row in rows:
        s = book.scenarios[row.split("`")[1]]
        _, _name, lengths, load, lines, _ = (c.strip() for c in row.split("|"))
        assert lengths == f"{s.input_len} / {s.output_len}"
        assert load == (f"{s.rate:g} req/s" if s.rate is not None else f"concurrency {s.concurrency}")
        for line in s.slos:
            assert f"{line.metric.upper()} {line.percentile.upper()} < {line.threshold_ms:g} ms" in lines
