"""Does a step's attention run over each sequence, or over the whole step packed? Read from the steps. Pure.

Engines with paged or flash attention (vLLM, SGLang, llama.cpp) compute each sequence's own (query,
key) pairs. An engine that packs the step's sequences into one row under one mask (Hugging Face
`transformers serve` with continuous batching hands `sdpa` such a mask) computes every pair of the
step: a step holding 30 newcomers' 268-token prompts costs more the more requests decode beside it
(on an H200: about 65 ms more than a decode step beside 1, 110 beside 31, 195 beside 68).

The steps are rebuilt from the per-token timestamps: requests decoding side by side get each step's
token together, so a load's token times cluster into steps (a gap wider than a third of the load's
median time per output token parts two). A cluster that holds a request twice, or fewer tokens than
requests then decoding, is not sound: a load with more than a tenth of them is not read, and no step
is read beside one. A step that holds newcomers' first tokens beside other sequences is set against
the median of the next decode-only steps (up to 5 of the 8 after it, none right after requests
ended: those cost the engine more): its extra. Those may run at a batch larger by newcomers that
joined meanwhile, a few per-sequence costs, small against a group's prefill. Two families:

    packed         extra = p x (tokens in the step) x (keys in the step)
    per-sequence   extra = c + a x (prompt tokens) + b x (their own pairs)

Each is fitted to every load but one and judged on the one left out, in turn (RMS; 3 loads or more
with such steps), on the same steps (a step either misfits by more than OUTLIER_SDS robust sds, a
stall, is dropped for both). Packed is chosen where its held-out RMS is at most PACKED_MARGIN of
per-sequence's and p lies two standard errors above zero; per-sequence where its own is at most
PACKED_MARGIN of packed's; else per-sequence is kept (vLLM's), said undecided with what would decide.
The simulator then prices a step with a prefill beside other sequences at its decode part plus the
larger of p x tokens x keys and the step's prompts priced as one sequence (a packed row, as the ladder
measured prompts alone), so a prompt beside a decode never costs less than alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad, usable
from tokenpace.core.record import RequestRecord
from tokenpace.core.stats import robust_sd

MIN_LOADS = 3  # loads with packed steps to judge the families on held-out error
MIN_STEPS = 10  # steps with newcomers beside others, over all loads
PACKED_MARGIN = 0.75  # packed's held-out RMS at most this share of per-sequence's, to be chosen
SPLIT_SHARE = 1 / 3  # a gap wider than this share of the median time per output token parts two steps
BAD_STEPS = 0.1  # share of rebuilt steps that may be wrong (a request twice, one missing) in a load read
AFTER = 8  # decode-only steps looked at after a packed step, for its baseline
BASELINE = 5  # of which at most this many count
MAX_TOKENS = 500_000  # token timestamps read per load (a bound on the work; records cap theirs too)
OUTLIER_SDS = 4.0  # residuals past this many robust sds (a stall, a collection) are dropped once


@dataclass(frozen=True, slots=True)
class Packing:
    pair: float  # seconds per (query, key) pair across the step; 0: per-sequence attention
    decided: bool
    note: str


@dataclass(frozen=True, slots=True)
class _Row:
    load: str
    extra: float  # seconds over the decode-only steps after it
    packed_pairs: float  # tokens x keys of the whole step
    prompt_tokens: float
    own_pairs: float  # the newcomers' own causal pairs


def steps_of(load: MeasuredLoad) -> list[_Row] | str:
    """The load's steps with newcomers beside others, or why not read."""
    ok = [r for r in usable(load.records) if r.token_ns and not r.token_ns_dropped and _one_per_chunk(r)]
    if len(ok) < 2:
        return "fewer than 2 requests with every token's time"
    tpot = np.median([(r.token_ns[-1] - r.token_ns[0]) / (len(r.token_ns) - 1) for r in ok])
    tol = SPLIT_SHARE * float(tpot)
    times: list[int] = []
    who: list[int] = []
    ctx: list[int] = []
    cutoff = None  # past MAX_TOKENS: steps from the first left-out request's first token are not read
    for i, r in enumerate(ok):
        n = len(r.token_ns)
        if len(times) + n > MAX_TOKENS:
            cutoff = min(x.token_ns[0] for x in ok[i:])
            ok = ok[:i]
            break
        times += r.token_ns
        who += [i] * n
        p = r.prompt_tokens or r.prompt_tokens_requested or 0
        ctx += range(p, p + n)  # keys a token's query sees: its prompt and the tokens before it
    order = np.argsort(np.asarray(times, dtype=np.int64), kind="stable")
    t = np.asarray(times, dtype=np.int64)[order]
    req = np.asarray(who)[order]
    keys = np.asarray(ctx, dtype=np.float64)[order]
    first_of = np.asarray([r.token_ns[0] for r in ok], dtype=np.int64)
    last_of = np.asarray([r.token_ns[-1] for r in ok], dtype=np.int64)
    is_first = t == first_of[req]
    is_last = t == last_of[req]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(t) > tol) + 1])
    ends = np.concatenate([starts[1:], [len(t)]])
    steps = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        if cutoff is not None and t[a] >= cutoff:
            break
        rs = req[a:b]
        decoding = int(np.count_nonzero((first_of < t[a] - tol) & (last_of >= t[a])))
        new = is_first[a:b]
        prompts = keys[a:b][new]
        # a newcomer's queries are its prompt's tokens; a decoding request's is one token
        tokens = float(prompts.sum() + np.count_nonzero(~new))
        all_keys = float(prompts.sum() + keys[a:b][~new].sum())
        steps.append(_Step(
            int(t[a]), int(new.sum()), float(prompts.sum()), float((prompts * (prompts + 1) / 2).sum()),
            tokens * all_keys, int(is_last[a:b].sum()), b - a,
            len(np.unique(rs)) == len(rs) and int(np.count_nonzero(~new)) >= decoding,
        ))  # fmt: skip
    bad = sum(not st.sound for st in steps)
    if bad > BAD_STEPS * len(steps):
        return (
            f"its steps could not be told apart from the token times ({bad} of {len(steps)} "
            "clusters held a request twice or missed one decoding)"
        )
    return _rows(load.label, steps)


@dataclass(frozen=True, slots=True)
class _Step:
    start: int  # ns: its first token's arrival
    new: int  # newcomers (first tokens)
    prompt: float  # their prompt tokens
    own: float  # their own causal pairs
    pairs: float  # tokens x keys of the whole step
    ended: int  # requests whose last token it was
    size: int  # tokens
    sound: bool  # each request at most once, none decoding missing


def _rows(label: str, steps: list[_Step]) -> list[_Row]:
    """Each step with newcomers beside others, set against the median of the
    next decode-only steps (up to BASELINE of the AFTER after it, none after an end): its extra.
    Those may run at a batch larger by the newcomers that joined meanwhile (a few per-sequence costs:
    small against a group's prefill). Read only where it, the step before and its baseline are sound."""
    rows = []
    for k in range(1, len(steps)):
        st, before = steps[k], steps[k - 1]
        if st.new == 0 or st.size <= 1 or not (st.sound and before.sound):
            continue  # nothing joined; a request alone; a step not told apart
        plain = [j for j in range(k + 1, min(len(steps), k + 1 + AFTER))
                 if steps[j].new == 0 and steps[j - 1].ended == 0][:BASELINE]  # fmt: skip
        if len(plain) < 3 or not all(steps[j].sound and steps[j - 1].sound for j in plain):
            continue
        base = float(np.median([(steps[j].start - steps[j - 1].start) / 1e9 for j in plain]))
        extra = (st.start - before.start) / 1e9 - base
        rows.append(_Row(label, extra, st.pairs, st.prompt, st.own))
    return rows


def _one_per_chunk(r: RequestRecord) -> bool:
    """Every timestamp one token's (a server that streams several a chunk blurs the steps)."""
    return not r.chunk_tokens or max(r.chunk_tokens) <= 1


Family = Callable[[_Row], list[float]]
FAMILIES: dict[str, Family] = {
    "packed": lambda r: [r.packed_pairs],
    "per-sequence": lambda r: [1.0, r.prompt_tokens, r.own_pairs],
}


def _held_out_rms(x: np.ndarray, y: np.ndarray, loads: np.ndarray) -> float:
    """RMS of each load's residuals under the family fitted to the other loads."""
    errs: list[float] = []
    for ld in dict.fromkeys(loads.tolist()):
        out = loads == ld
        coef = np.linalg.lstsq(x[~out], y[~out], rcond=None)[0]
        errs += (y[out] - x[out] @ coef).tolist()
    return float(np.sqrt(np.mean(np.square(errs))))


def packing_fit(loads: Sequence[MeasuredLoad]) -> Packing:
    """Packed or per-sequence attention, as the loads' steps support it (module doc)."""
    rows: list[_Row] = []
    unread = []
    for ld in loads:
        got = steps_of(ld)
        if isinstance(got, str):
            unread.append(f"{ld.label}: {got}")
        else:
            rows += got
    packed_loads = {r.load for r in rows}
    skipped = f"; not read: {'; '.join(unread[:3])}" if unread else ""

    def not_tested(n_loads: int, n_steps: int) -> Packing:
        note = (
            f"attention: per-sequence kept (vLLM's), packed not tested: {n_loads} load(s) had newcomers "
            f"join others in a step ({MIN_LOADS} needed, {n_steps} steps){skipped}; closed loops of 4, 16 "
            "and 64 users would test it"
        )
        return Packing(0.0, False, note)

    if len(packed_loads) < MIN_LOADS or len(rows) < MIN_STEPS:
        return not_tested(len(packed_loads), len(rows))
    y = np.asarray([r.extra for r in rows])
    xs = {name: np.asarray([f(r) for r in rows], dtype=float) for name, f in FAMILIES.items()}
    # the same rows for both families: a step either misfits past OUTLIER_SDS (a stall) is dropped
    keep = np.ones(len(y), dtype=bool)
    for x in xs.values():
        resid = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
        keep &= np.abs(resid - np.median(resid)) <= OUTLIER_SDS * max(robust_sd(resid), 1e-9)
    labels = np.asarray([r.load for r in rows])[keep]
    y = y[keep]
    if len(set(labels.tolist())) < MIN_LOADS or len(y) < MIN_STEPS:  # stalls took a load's steps
        return not_tested(len(set(labels.tolist())), len(y))
    rms = {name: _held_out_rms(x[keep], y, labels) for name, x in xs.items()}
    xp = xs["packed"][keep]
    pair = float(np.linalg.lstsq(xp, y, rcond=None)[0][0])
    s2 = float(np.sum((y - xp[:, 0] * pair) ** 2)) / max(1, len(y) - 1)
    se = float(np.sqrt(s2 / float(xp[:, 0] @ xp[:, 0])))
    said = (
        f"over {len(y)} steps where newcomers joined others, in {len(packed_loads)} loads, the error on the "
        f"load left out is {rms['packed'] * 1e3:.3g} ms RMS packed, {rms['per-sequence'] * 1e3:.3g} ms "
        f"per-sequence; packed prices {pair * 1e9:.3g} ns (+-{2 * se * 1e9:.2g}) a pair{skipped}"
    )
    if rms["packed"] <= PACKED_MARGIN * rms["per-sequence"] and pair > 2 * se:
        return Packing(pair, True, f"attention: packed over the whole step ({said})")
    if rms["per-sequence"] <= PACKED_MARGIN * rms["packed"]:
        return Packing(0.0, True, f"attention: per-sequence, each sequence's own pairs ({said})")
    return Packing(
        0.0, False,
        f"attention: per-sequence kept (vLLM's), packed undecided ({said}); groups of newcomers beside "
        "more decoding requests would tell them apart",
    )  # fmt: skip
