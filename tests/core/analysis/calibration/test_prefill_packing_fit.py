"""prefill_packing_fit on made-up engines (a step-by-step closed loop whose newcomers join running
decodes) and on the H200 records: packed attention is told from per-sequence attention by the steps
the token times show, on loads the fit did not see."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tokenpace.app.calibration.calibrate import load_runs
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.analysis.calibration.prefill_packing_fit import packing_fit, steps_of
from tokenpace.core.record import RequestRecord

MS = 1_000_000
DATA = Path(__file__).resolve().parents[3] / "data" / "engines" / "h200"
PAIR = 1e-9  # seconds per pair of the packed engine


def _closed_loop(
    users: int, packed: bool, requests_per_user: int = 6, prompt: int = 200, join_ms: float = 0.0
) -> MeasuredLoad:
    """A continuous-batching engine step by step: every request sent before a step starts joins it
    (its prefill in that step, its first token at the step's end), each running request gets a token
    at each step's end, a user sends again 1 ms after its last token. A step costs 20 ms + 0.2 ms a
    sequence, plus, packed, 1 ns for every (query, key) pair of the step, or per sequence, 5 us a
    prompt token, 0.1 ns a pair of its own and join_ms a step any joined; +-3 % noise. Output lengths
    of 6, 9 or 13 tokens set the users apart, so newcomers join beside different numbers of decoding
    requests."""
    rng = np.random.default_rng(users + 7 * packed)
    outs = (6, 9, 13)
    sends = {u: MS // 2 for u in range(users)}  # user -> when its next request is sent (ns)
    left = {u: requests_per_user for u in range(users)}
    running: list[dict] = []
    records: list[RequestRecord] = []
    t = MS
    while sends or running:
        new = []
        for u in [u for u, sent in sends.items() if sent < t]:
            k = requests_per_user - left[u]
            new.append({"user": u, "k": k, "sent": sends.pop(u), "out": outs[(u + k) % 3], "tokens": []})
        seqs = len(running) + len(new)
        if seqs == 0:  # idle until the next send
            t = min(sends.values()) + MS
            continue
        q = len(running) + prompt * len(new)
        keys = sum(prompt + len(r["tokens"]) for r in running) + prompt * len(new)
        own = len(new) * (5e-6 * prompt + 0.1e-9 * prompt * (prompt + 1) / 2) + join_ms / 1e3
        extra = (PAIR * q * keys if packed else own) if new else 0.0
        dur = (0.020 + 0.0002 * seqs + extra) * (1 + 0.03 * rng.standard_normal())
        t += round(dur * 1e9)
        running += new
        for i, r in enumerate(running):
            r["tokens"].append(t + i * 20_000)  # the server writes the chunks one after another
        done = [r for r in running if len(r["tokens"]) == r["out"]]
        running = [r for r in running if len(r["tokens"]) < r["out"]]
        for r in done:
            records.append(
                RequestRecord(
                    request_id=f"{r['user']}-{r['k']}", index=len(records), sent_ns=r["sent"],
                    first_token_ns=r["tokens"][0], end_ns=r["tokens"][-1], token_ns=r["tokens"],
                    output_tokens_server=r["out"], prompt_tokens=prompt,
                )
            )  # fmt: skip
            left[r["user"]] -= 1
            if left[r["user"]]:
                sends[r["user"]] = r["tokens"][-1] + MS
    return MeasuredLoad(label=f"c={users}", records=tuple(records), concurrency=users)


def _sweep(packed: bool, users: tuple[int, ...] = (4, 16, 48), **kw) -> list[MeasuredLoad]:
    return [_closed_loop(u, packed, **kw) for u in users]


def test_a_packed_engine_is_told_and_its_pair_price_recovered() -> None:
    got = packing_fit(_sweep(packed=True))
    assert got.decided and got.pair == pytest.approx(PAIR, rel=0.1), got.note
    assert got.note.startswith("attention: packed over the whole step")


@pytest.mark.parametrize(
    "kw", [{}, {"join_ms": 5.0, "prompt": 1000}], ids=["plain", "a cost per join, long prompts"]
)
def test_an_engine_with_per_sequence_attention_keeps_it(kw: dict) -> None:
    got = packing_fit(_sweep(packed=False, **kw))
    assert got.pair == 0.0 and got.decided, got.note
    assert got.note.startswith("attention: per-sequence, each sequence's own pairs")


def test_too_few_loads_with_newcomers_beside_others_test_nothing() -> None:
    got = packing_fit(_sweep(packed=True, users=(4, 16)))
    assert got.pair == 0.0 and "not tested" in got.note and "3 needed" in got.note


def test_steps_are_read_only_where_every_token_has_its_time() -> None:
    load = _closed_loop(16, packed=True)
    rows = steps_of(load)
    assert not isinstance(rows, str) and rows  # newcomers beside others, each step read
    lost = replace(load, records=tuple(replace(r, token_ns_dropped=1) for r in load.records))
    assert isinstance(steps_of(lost), str)
    chunked = replace(load, records=tuple(replace(r, chunk_tokens=[2] * 4) for r in load.records))
    assert isinstance(steps_of(chunked), str)


def test_steps_that_cannot_be_told_apart_are_not_read() -> None:
    """Tokens that reach the client up to a step late (a congested client or proxy): the clusters hold
    a request twice or miss one decoding, and the load's steps are not read."""
    load = _closed_loop(16, packed=True)
    rng = np.random.default_rng(1)
    late = []
    for r in load.records:
        tokens = np.cumsum([r.token_ns[0], *np.diff(r.token_ns)]) + rng.integers(0, 30 * MS, len(r.token_ns))
        tokens = np.maximum.accumulate(tokens).tolist()
        late.append(replace(r, token_ns=tokens, first_token_ns=tokens[0], end_ns=tokens[-1]))
    got = steps_of(replace(load, records=tuple(late)))
    assert isinstance(got, str) and "could not be told apart" in got


def test_on_the_h200_sweep_packed_attention_predicts_the_left_out_loads_closer() -> None:
    """The sweep's 4, 16 and 64 users: a step holding a group of newcomers costs more the more requests
    decode beside it, as one mask over the packed step prices it (about 0.9 ns a pair)."""
    runs = load_runs([str(DATA / "conc.json")])
    got = packing_fit([ld for run in runs for ld in run.loads])
    assert got.decided and 0.5e-9 < got.pair < 1.5e-9, got.note
    rms = re.search(r"(\d+\.?\d*) ms RMS packed, (\d+\.?\d*) ms per-sequence", got.note)
    assert rms and float(rms[1]) < 0.75 * float(rms[2]), got.note
