"""The reads a console's pages reuse (``Kept``): one read per key while kept, within their bounds
(how many, how large in all: a read larger than that is not kept) and their time to live."""

from __future__ import annotations

from collections.abc import Callable

from tokenpace.app.console.page import Ask, Kept


def _reader(reads: list[str]) -> Callable[[str, int], tuple[str, int]]:
    def read(key: str, n: int) -> tuple[str, int]:
        reads.append(key)
        return key, n

    return read


def test_a_kept_read_is_reused_until_pushed_out_by_count_or_size() -> None:
    kept, reads = Kept(most=2, size_max=100, ttl_s=60.0), list[str]()
    read = _reader(reads)
    get = lambda key, n: kept.get(key, lambda: read(key, n), lambda r: r[1])  # noqa: E731
    assert get("a", 10) == ("a", 10) and get("a", 10) == ("a", 10) and reads == ["a"]
    get("b", 10)
    get("a", 10)  # the newest used: b is the oldest now
    get("c", 10)
    assert kept.held() == 20
    get("a", 10)
    get("b", 10)
    assert reads == ["a", "b", "c", "b"]  # at most 2: b was pushed out, a was not
    get("big", 101)
    get("big", 101)
    assert reads[-2:] == ["big", "big"] and kept.held() == 20  # larger than all may hold: not kept
    get("d", 95)
    assert kept.held() == 95  # the others let go to stay within 100 in all
    get("a", 10)
    assert reads[-1] == "a" and kept.held() == 10


def test_a_kept_read_lives_no_longer_than_its_ttl() -> None:
    kept, reads = Kept(most=4, size_max=100, ttl_s=0.0), list[str]()
    read = _reader(reads)
    kept.get("a", lambda: read("a", 1), lambda r: r[1])
    kept.get("a", lambda: read("a", 1), lambda r: r[1])
    assert reads == ["a", "a"]


def test_an_ask_keeping_reads_answers_the_same_request() -> None:
    ask = Ask([("guard", "ttft.p95=+10%")], {"session": "s"})
    kept = Kept(most=1, size_max=1, ttl_s=1.0)
    other = ask.keeping(kept)
    assert ask.kept is None and other.kept is kept
    assert other.key() == ask.key() and other.text("guard") == "ttft.p95=+10%"
    assert other.path("session") == "s"


def test_a_relative_time_is_told_from_a_fixed_one() -> None:
    ask = Ask([("since", "1h"), ("until", "2026-05-01")], {})
    assert ask.relative("since") and not ask.relative("until") and not ask.relative("nothing")
