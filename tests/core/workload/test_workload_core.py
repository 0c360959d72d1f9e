"""Pure workload pieces: prompts of exact length, dataset/pairs/trace workloads, shared prefixes,
sessions, breakdowns and the length-fit report."""

import itertools

import numpy as np
import pytest

from tokenpace.core.breakdown import by_length_bins, by_prefix_state, by_turn, prompt_check
from tokenpace.core.record import RequestRecord, Status
from tokenpace.core.workload import (
    DatasetEntry,
    DatasetWorkload,
    PairsWorkload,
    SyntheticWorkload,
    TraceRow,
    TraceWorkload,
)
from tokenpace.core.workload.length_fit import ks_distance, length_fit
from tokenpace.core.workload.lengths import parse_length
from tokenpace.core.workload.prefixes import SharedPrefixes
from tokenpace.core.workload.prompts import EncodeCounter, PromptMaker
from tokenpace.core.workload.sessions import SessionWorkload, history_messages

MS = 1_000_000


def take(workload, n):
    it = workload.items()
    return [next(it) for _ in range(n)]


def chars_counter():
    """A toy 'tokenizer': one token per 3 characters of each word, so words cost 1-4 tokens."""

    def encode(text):
        return [0] * sum(-(-len(w) // 3) for w in text.split())

    return EncodeCounter(encode, "toy")


def test_prompt_maker_hits_the_length_exactly_with_a_tokenizer():
    maker = PromptMaker(chars_counter())
    rng = np.random.default_rng(1)
    for n in (1, 7, 100, 513):
        text, got = maker.make(n, rng)
        assert got == n and maker.counter.count(text) == n
    # only words that cost one token mid-text are kept
    assert all(len(w) <= 3 for w in maker.words)


def test_word_estimate_is_labelled_and_counts_words():
    maker = PromptMaker()
    text, got = maker.make(50, np.random.default_rng(0))
    assert got == 50 == len(text.split())
    assert maker.describe()["kind"] == "estimate" and maker.describe()["exact"] is False


def test_dataset_workload_is_seeded_and_uses_given_output_lengths():
    entries = [DatasetEntry(turns=(f"prompt number {i}",), output_len=i + 1) for i in range(10)]
    a = take(DatasetWorkload(entries, parse_length("99"), seed=3), 10)
    b = take(DatasetWorkload(entries, parse_length("99"), seed=3), 10)
    c = take(DatasetWorkload(entries, parse_length("99"), seed=4), 10)
    assert [x.prompt for x in a] == [x.prompt for x in b] != [x.prompt for x in c]
    assert sorted(x.prompt for x in a) == sorted(e.turns[0] for e in entries)  # each once per pass
    assert all(x.output_tokens == int(x.prompt.split()[-1]) + 1 for x in a)
    assert all(x.input_tokens == 3 for x in a)


def test_dataset_without_output_length_uses_the_reply_or_the_fallback():
    entries = [
        DatasetEntry(turns=("hi there",), replies=("one two three four",)),
        DatasetEntry(turns=("hello",)),
        DatasetEntry(messages=({"role": "system", "content": "be brief"}, {"role": "user", "content": "q"})),
    ]
    items = take(DatasetWorkload(entries, parse_length("17"), seed=0), 3)
    by_prompt = {x.prompt: x for x in items}
    assert by_prompt["hi there"].output_tokens == 4
    assert by_prompt["hello"].output_tokens == 17
    chat = by_prompt["be brief q"]
    assert chat.messages[0] == {"role": "system", "content": "be brief"}


def test_pairs_keep_the_joint_distribution():
    log = np.array([[100, 900], [2000, 10]] * 50)
    items = take(PairsWorkload(log, seed=1), 200)
    assert {(x.input_tokens, x.output_tokens) for x in items} == {(100, 900), (2000, 10)}
    assert all(len(x.prompt.split()) == x.input_tokens for x in items)


def test_length_fit_reports_ks_quantiles_and_correlation():
    rng = np.random.default_rng(0)
    ins = rng.integers(10, 1000, 2000)
    log = np.stack([ins, ins // 2 + 1], axis=1)
    good = log[rng.integers(0, len(log), 2000)]
    fit = length_fit(log, good)
    assert fit["matches"] and fit["input"]["ks"] < 0.05
    assert fit["correlation"]["sampled"] == pytest.approx(1.0, abs=0.01)
    bad = np.stack([ins * 3, rng.permutation(ins // 2 + 1)], axis=1)
    fit = length_fit(log, bad)
    assert not fit["matches"] and fit["input"]["ks"] > 0.5
    assert abs(fit["correlation"]["sampled"]) < 0.1
    assert set(fit["input"]["quantiles"]) == {"p10", "p50", "p90", "p99"}
    assert ks_distance(np.array([1, 2, 3]), np.array([1, 2, 3])) == 0.0
    assert ks_distance(np.array([1, 2]), np.array([5, 6])) == 1.0


def test_trace_offsets_speedup_and_shared_hash_blocks():
    rows = [
        TraceRow(10.0, 40, 5, hash_ids=(1, 2, 3)),
        TraceRow(12.0, 35, 6, hash_ids=(1, 2, 9)),
        TraceRow(14.0, 20, 7, hash_ids=(4, 5)),
    ]
    wl = TraceWorkload(rows, speedup=2.0, seed=0, block_tokens=16)
    assert list(wl.offsets()) == [0.0, 1.0, 2.0]
    a, b, c = take(wl, 3)
    assert [x.output_tokens for x in (a, b, c)] == [5, 6, 7]
    assert [x.input_tokens for x in (a, b, c)] == [40, 35, 20]
    assert a.prompt.split()[:32] == b.prompt.split()[:32]  # blocks 1 and 2 shared
    assert a.prompt.split()[32:] != b.prompt.split()[32:]
    assert c.prompt.split()[:16] != a.prompt.split()[:16]
    assert (a.prefix_cold, b.prefix_cold, c.prefix_cold) == (True, False, True)
    again = take(TraceWorkload(rows, speedup=2.0, seed=0, block_tokens=16), 3)
    assert [x.prompt for x in again] == [x.prompt for x in (a, b, c)]


def test_trace_prefix_ids_share_the_groups_shortest_input():
    rows = [TraceRow(0, 30, 1, prefix_id="a"), TraceRow(1, 50, 1, prefix_id="a"), TraceRow(2, 40, 1)]
    a, b, c = take(TraceWorkload(rows), 3)
    assert a.prompt.split()[:30] == b.prompt.split()[:30] and a.input_tokens == 30 and b.input_tokens == 50
    assert c.prefix_id is None and c.prefix_cold is None


def test_shared_prefixes_prepend_one_of_n_and_mark_cold_first_use():
    base = SyntheticWorkload(parse_length("10"), parse_length("5"), seed=2)
    wl = SharedPrefixes(base, prefix_len=20, prefixes=3, maker=PromptMaker(), seed=2)
    items = take(wl, 60)
    texts = [t for t, _ in wl.texts()]
    assert all(x.input_tokens == 30 and len(x.prompt.split()) == 30 for x in items)
    assert all(x.prompt.startswith(texts[x.prefix_id]) for x in items)
    assert {x.prefix_id for x in items} == {0, 1, 2}
    assert sum(x.prefix_cold for x in items) == 3
    firsts = {}
    for x in items:
        firsts.setdefault(x.prefix_id, x.index)
    assert all(x.prefix_cold == (firsts[x.prefix_id] == x.index) for x in items)


def test_sessions_group_turns_and_use_conversations_when_the_dataset_has_them():
    base = SyntheticWorkload(parse_length("5"), parse_length("5"), seed=0)
    sessions = SessionWorkload(base, turns=3).sessions()
    first, second = next(sessions), next(sessions)
    assert len(first) == 3 and first[0].index == 0 and second[0].index == 3
    conv = DatasetEntry(turns=("a b", "c d e", "f"), replies=("x", "y y"))
    ds = DatasetWorkload([conv], parse_length("9"), seed=0)
    (turns,) = [next(SessionWorkload(ds, turns=5).sessions())]
    assert [t.prompt for t in turns] == ["a b", "c d e", "f"]
    assert [t.output_tokens for t in turns] == [1, 2, 9]
    hist = [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "x"}]
    assert history_messages(hist, turns[1])[-1] == {"role": "user", "content": "c d e"}


def rec(i, ttft_ms, n_in, n_out, **kw):
    sent = i * 10**9
    return RequestRecord(
        request_id=str(i),
        sent_ns=sent,
        first_token_ns=sent + ttft_ms * MS,
        end_ns=sent + (ttft_ms + 10 * n_out) * MS,
        output_tokens_server=n_out,
        prompt_tokens_requested=n_in,
        output_tokens_requested=n_out,
        **kw,
    )


def test_length_bins_split_long_in_short_out_from_short_in_long_out():
    records = [rec(i, 500, 4000, 20) for i in range(4)] + [rec(10 + i, 50, 100, 800) for i in range(6)]
    records.append(rec(99, 1, 100, 800, warmup=True))
    cells = by_length_bins(records)["cells"]
    assert [(c["input_bin"], c["output_bin"], c["n"]) for c in cells] == [
        ("1-128", "257-1024", 6),
        ("2049-8192", "1-64", 4),
    ]
    assert cells[0]["ttft_ms"]["p50"] == 50 and cells[1]["ttft_ms"]["p50"] == 500


def test_turn_and_prefix_breakdowns():
    records = [rec(i, 100 + 50 * t, 10 * (t + 1), 5, turn=t, session=i) for i in range(3) for t in range(2)]
    turns = by_turn(records)
    assert [(t["turn"], t["ttft_ms"]["p50"], t["prompt_tokens_mean"]) for t in turns] == [
        (0, 100, 10),
        (1, 150, 20),
    ]
    pre = [
        rec(0, 300, 10, 5, prefix_cold=True),
        rec(1, 40, 10, 5, prefix_cold=False),
        rec(2, 60, 10, 5, prefix_cold=False),
    ]
    state = by_prefix_state(pre)
    assert state["cold"]["ttft_ms"]["p50"] == 300 and state["warm"]["ttft_ms"]["p50"] == 50


def test_prompt_check_flags_more_than_two_percent():
    ok = [rec(i, 10, 100, 5, prompt_tokens=101) for i in range(5)]
    assert prompt_check(ok)["mismatch"] is False
    off = [rec(i, 10, 100 * (i + 1), 5, prompt_tokens=110 * (i + 1)) for i in range(5)]  # 10 % of each
    check = prompt_check(off)
    assert check["mismatch"] is True and check["server_over_asked"] == pytest.approx(1.1)
    template = prompt_check([rec(i, 10, 100, 5, prompt_tokens=110) for i in range(5)])  # the same 10 each
    assert template["mismatch"] is False and template["template_overhead_tokens"] == 10
    failed = [rec(0, 10, 100, 5, prompt_tokens=500, status=Status.HTTP_ERROR)]
    assert prompt_check(failed)["compared"] == 0


def test_prefixes_start_each_session_of_a_conversation_dataset():
    convs = [DatasetEntry(turns=(f"first {i}", f"second {i}"), replies=("r", "r")) for i in range(4)]
    ds = DatasetWorkload(convs, parse_length("5"), seed=0)
    wl = SessionWorkload(SharedPrefixes(ds, prefix_len=6, prefixes=1, maker=PromptMaker(), seed=0), turns=2)
    groups = list(itertools.islice(wl.sessions(), 4))
    for group in groups:
        assert group[0].input_tokens == 8 and group[0].prefix_id == 0
        assert group[1].prompt.startswith("second") and group[1].prefix_id is None
