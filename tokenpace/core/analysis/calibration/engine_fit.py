"""Fit the simulator's step-cost model to measured loads: what a calibration identifies, and how.

Pure. The simulator prices one engine step as
    F + seqs x S + max(compute, memory),  compute = tokens x a + attention pairs x p,
                                          memory  = W + decoding context x k
(tokenpace.sim.model.costmodel). From the client's records (engine_obs) this fits, in order:

1. prefill (prefill_line_fit): TTFT of requests alone in flight = I + max(a x n + p x n(n+1)/2, W)
   against the prompt length n; a flat start (short prompts all as slow) is the memory-bound
   plateau and gives W;
2. decode: time per output token = F + b x S + W + k x context against the batch b and its context;
3. the round trip R and the weights' time W: a prefill step and a decode step share F + S, so
   TTFT's intercept I = R + F + S and a decode step at batch 1 = F + S + W. Without a plateau or the
   server's own TTFT one of R, W is not identified; the gap is given to whichever it must be;
4. F and S again by least squares with a, p, W, k held, over both kinds of observation;
5. the scheduler limit: the most requests ever decoding at once, where a load asked for more (or the
   server's running gauge while requests waited);
6. the scheduler's behaviours, identified from the loads (not chosen by hand): a per-step floor
   against a line by held-out error (scheduler_fit), prefill-first steps from the per-token gaps
   (prefill_gaps), packed attention from the steps rebuilt from them (prefill_packing_fit, read
   first: it prices the joining prefills step 2 takes out); loads during which the engine moved are
   named and left out of the first.

Each parameter says whether the data identified it, and how, or why it was left at a default.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any

import numpy as np

from tokenpace.core.analysis.calibration.engine_costs import (
    EngineFit,
    Param,
    StepCosts,
)
from tokenpace.core.analysis.calibration.engine_decode_obs import decode_observations
from tokenpace.core.analysis.calibration.engine_drift import DecodeDrift, decode_drift, steady_part
from tokenpace.core.analysis.calibration.engine_obs import (
    DecodeObs,
    MeasuredLoad,
    PrefillObs,
    kv_capacity_estimates,
    max_decoding_at_once,
    prefill_observations,
    timeline,
)
from tokenpace.core.analysis.calibration.engine_solve import solve, weighted_median
from tokenpace.core.analysis.calibration.engine_speeds import (
    SPLIT_RATIO,
    SlowSpeed,
    slow_speed,
    slow_throughout,
    speed_misfit,
    split_speeds,
    two_speeds,
)
from tokenpace.core.analysis.calibration.prefill_gaps import prefill_gaps
from tokenpace.core.analysis.calibration.prefill_line_fit import fit_prefill
from tokenpace.core.analysis.calibration.prefill_packing_fit import Packing, packing_fit
from tokenpace.core.analysis.calibration.prefill_table_fit import prefill_table
from tokenpace.core.analysis.calibration.scheduler_fit import FLOOR, identify_step_law
from tokenpace.core.analysis.calibration.step_noise_fit import fit_step_noise
from tokenpace.core.stats import robust_sd

DEFAULT_MAX_NUM_SEQS = 256


def fit_engine(
    loads: Sequence[MeasuredLoad],
    max_num_seqs: int | None = None,
    revisits: Sequence[tuple[MeasuredLoad, MeasuredLoad]] = (),
) -> EngineFit:
    """The cost model and scheduler limit that explain the loads; ValueError when they cannot.

    `revisits`: (a load's first pass, its revisit after the sweep's last step), to say whether the
    engine's decode speed moved meanwhile (engine_drift); a move decided is kept as a residual.

    Where the loads show two speeds (engine_speeds.split_speeds), the step law is fitted to the fast
    waves (a load slow throughout, told by that fit, moved to the slow side and the fit redone) and
    the slow speed apart; kept only where, over the same requests, the two speeds each at its own
    waves misfit the decode step KEEP_MARGIN less than one speed does."""
    packing = packing_fit(loads)  # from every load's steps: a step's extra is read against its neighbours
    one = _fit(loads, max_num_seqs, revisits, packing)
    split = split_speeds(loads)
    if split is None:
        return one
    if not all(split.parted):  # a load slow throughout: told by the loads that parted
        sure = [ld for ld, parted in zip(split.fast, split.parted, strict=True) if parted]
        with suppress(ValueError):  # those alone cannot be fitted (no request alone): none moved
            told = _fit(sure, max_num_seqs, revisits, packing)
            seen = told.observed.get("batch", [0.0, 0.0])[-1]
            split = slow_throughout(split, told.costs, told.step_floor, seen)
    try:
        two = _fit(list(split.fast), max_num_seqs, revisits, packing)
    except ValueError as e:
        two, why = None, f"the fast waves alone cannot be fitted ({e})"
    slow = slow_speed(split, two.costs, two.step_floor) if two is not None else why
    if isinstance(slow, SlowSpeed):
        assert two is not None
        one_rms, two_rms = speed_misfit(split, one.costs, two.costs, slow, (one.step_floor, two.step_floor))
        if two_rms <= (1 - KEEP_MARGIN) * one_rms:
            said = (
                f"{slow.note}. Kept: over the same requests the two speeds misfit the decode step at "
                f"{two_rms:.1%} RMS, one speed at {one_rms:.1%}"
            )
            return replace(
                two,
                slow_extra_fixed=slow.extra_fixed,
                slow_extra_per_seq=slow.extra_per_seq,
                behaviours=(*two.behaviours, said),
            )
        why = (
            f"over the same requests the two speeds misfit the decode step at {two_rms:.1%} RMS, one "
            f"speed at {one_rms:.1%}: not {KEEP_MARGIN:.0%} closer"
        )
    elif two is not None:
        why = slow
    note = (
        f"two speeds: not kept ({split.slow_waves} of {split.waves} waves in {len(split.slow)} loads "
        f"decoded {SPLIT_RATIO:.0f}x or more slower than their load's others, but {why}): one speed "
        "fitted to all"
    )
    return replace(one, behaviours=(*one.behaviours, note))


KEEP_MARGIN = 0.25  # the two speeds' misfit below the one speed's, at least, to be kept (2 more params)


def _fit(
    loads: Sequence[MeasuredLoad],
    max_num_seqs: int | None,
    revisits: Sequence[tuple[MeasuredLoad, MeasuredLoad]],
    packing: Packing,
) -> EngineFit:
    """fit_engine's fit of one speed to the loads given (all of them, or a split's fast waves)."""
    steady = [steady_part(ld) for ld in loads]  # each load less a warm-up; did the engine hold still?
    loads = [ld for ld, _, _ in steady]
    moved_within = [d for _, d, _ in steady if d.moved]
    # back and forth between two speeds (engine_speeds): a move too, which parts by send time miss
    moved_within += [s.as_drift() for ld, d, _ in steady if not d.moved and (s := two_speeds(ld))]
    timelines = [(ld, tl) for ld in loads if (tl := timeline(ld.records)) is not None]
    if not timelines:
        raise ValueError("no successful streamed request with two or more tokens in the runs given")
    # a load during which the engine moved measured two engines: no evidence of the decode step's law
    # (kept only when every load moved, and then said so by the step law's note)
    left_out = {d.load for d in moved_within}
    if all(ld.label in left_out for ld, _ in timelines):
        left_out = set()
    alone = [o for _, tl in timelines for o in prefill_observations(tl)]
    prefill = fit_prefill(alone)
    costs = StepCosts(per_token=prefill.per_token, per_pair=prefill.per_pair, packed_pair=packing.pair)
    result = None
    for _ in range(3):  # joining prefills and steps are priced with the previous round's costs
        decode: list[DecodeObs] = []
        for ld, tl in timelines:
            decode += decode_observations(tl, ld.label, costs)
        result = solve(prefill, [d for d in decode if d.load not in left_out], loads)
        costs = replace(result.costs, packed_pair=packing.pair)
        result = replace(result, costs=costs)
    assert result is not None
    limit = _scheduler_limit(timelines, max_num_seqs)
    noise = fit_step_noise(loads)
    by_length: dict[float, list[float]] = {}
    for o in alone:
        by_length.setdefault(o.prompt_tokens, []).append(o.ttft_s)
    table_n, table_ms, table = prefill_table(
        prefill.groups, result.costs, result.residuals["prefill_rel_rms"], noise.sigma, by_length
    )
    result = _as_means(result, noise.sigma)
    result, jitter = _with_jitter(result, alone)
    kv = _kv_capacity(loads)
    drifts = [decode_drift(first, again) for first, again in revisits]
    # how far it surely moved: the bound nearest zero (non-zero when moved), not the point estimate
    moved = [min(abs(d.low), abs(d.high)) for d in [*drifts, *moved_within] if d.moved]
    if moved:
        result = replace(result, residuals={**result.residuals, "decode_drift": max(moved)})
    most = max(max_decoding_at_once(tl) for _, tl in timelines)
    result = _behaviours(
        result, [ld for ld, _ in timelines], decode, moved_within, sorted(left_out), prefill.groups
    )
    result = replace(result, behaviours=(*result.behaviours, packing.note))
    return replace(
        result,
        observed={**result.observed, "decoding_at_once": [1.0, float(most)]},
        holds=(*result.holds, *(d.note for d in drifts), *(note for _, _, note in steady if note)),
        max_num_seqs=int(limit.value),
        kv_tokens=int(kv.value) if kv.identified else None,
        params=(*result.params, jitter, *noise.params, table, limit, kv),
        step_cv=noise.cv,
        step_cv_hold=noise.hold_s,
        prefill_table=tuple(zip(table_n, table_ms, strict=True)),
    )


def _behaviours(
    fit: EngineFit,
    loads: list[MeasuredLoad],
    decode: list[DecodeObs],
    moved: list[DecodeDrift],
    left_out: list[str],
    ttfts: list[tuple[float, float, float]],
) -> EngineFit:
    """Step 6: the step law and prefill-first steps, each with its support; the loads where the
    engine moved. A floor chosen replaces the line's F and S by the floor law's line past its kink
    (the roofline's memory part kept), and the round trip is settled again against floored steps."""
    law = identify_step_law(decode, left_out)
    c = fit.costs
    gaps = prefill_gaps(loads, _gap_predictions(c, decode))
    floor = 0.0
    if law.chosen == FLOOR:
        floor, line = law.law.floor, law.law
        c = replace(
            c, fixed=max(0.0, line.fixed - c.weights) if line.per_seq > 0 else 0.0, per_seq=line.per_seq
        )
        # the round trip: TTFT less one floored prefill step, weighted median over prompt lengths
        excess = [(t - max(floor, c.ttft(pn) - c.rtt), w) for pn, t, w in ttfts]
        c = replace(c, rtt=max(0.0, weighted_median(excess)))
    return replace(
        fit,
        costs=c,
        step_floor=floor,
        prefill_first=gaps.decided and gaps.chosen == "prefill_first",
        behaviours=(law.note, gaps.note),
        moved_within=tuple(d.note for d in moved),
    )


def _gap_predictions(c: StepCosts, decode: list[DecodeObs]) -> dict[str, tuple[float, float]]:
    """Per load: the excess of a gap a newcomer's prefill ran in, as prefill-first steps (a whole
    prefill step of the load's median prompt) and as mixed steps (what it adds to the decode step it
    joins at the load's median batch and context) predict it."""
    by: dict[str, list[DecodeObs]] = {}
    for o in decode:
        by.setdefault(o.load, []).append(o)
    out = {}
    for load, obs in by.items():
        n = float(np.median([o.prompt_tokens for o in obs]))
        b = float(np.median([o.batch for o in obs]))
        ctx = float(np.median([o.context for o in obs]))
        out[load] = (max(c.ttft(n) - c.rtt, 0.0), c.joining_prefill([n], b, ctx))
    return out


def _as_means(fit: EngineFit, sigma: float) -> EngineFit:
    """The prefill's coefficients as a step's mean: they were fitted to median TTFTs of one step each,
    and the simulator's step noise (lognormal, log sd sigma) has mean 1 and median exp(-sigma^2/2).
    The decode's come from times per output token, means of many steps already."""
    k = float(np.exp(0.5 * sigma * sigma))
    if k == 1.0:
        return fit
    c = fit.costs
    scaled = ("prefill_per_token", "attention_per_pair")
    note = f" (x {k:.3g}: a step's mean under the step noise)"
    params = tuple(
        replace(p, value=p.value * k, how=p.how + note) if p.name in scaled and p.identified else p
        for p in fit.params
    )
    return replace(fit, costs=replace(c, per_token=c.per_token * k, per_pair=c.per_pair * k), params=params)


def _kv_capacity(loads: Sequence[MeasuredLoad]) -> Param:
    estimates = [e for ld in loads for e in kv_capacity_estimates(ld)]
    if len(estimates) < 3:
        why = (
            "the server's KV gauge was never 5 % full at three scrapes or more (or is not exported): "
            "no KV limit in the profile, so past the real one (preemption, refusals) it does not hold"
        )
        return Param("kv_capacity", 0.0, "tokens", False, why)
    value = float(np.median(estimates))
    how = f"tokens the decoding requests held over the server's KV usage, median of {len(estimates)} scrapes"
    return Param("kv_capacity", round(value), "tokens", True, how)


HALF_NORMAL_SD = (1 - 2 / np.pi) ** 0.5  # sd of |N(0, s)| over s
HALF_NORMAL_MEAN = (2 / np.pi) ** 0.5  # its mean over s


def _with_jitter(fit: EngineFit, alone: list[PrefillObs]) -> tuple[EngineFit, Param]:
    """TTFT's spread at a prompt length (robust: 1.4826 x MAD around the length's median, so a misfit of
    the line is not counted as spread; the least over lengths with 5 requests or more), taken as the
    round trip's half-normal jitter, as the simulator draws it; the round trip keeps its mean. Part of
    that spread is the step noise's (step_noise_fit) and is counted twice: kept, because the step
    noise alone does not desynchronise a closed loop (requests that share steps share their noise).

    Without it a replayed closed loop of equal requests stays in lock step for ever, where a real
    one drifts apart and its newcomers' prefills land inside the others' decodes."""
    by_length: dict[float, list[float]] = {}
    for o in alone:
        by_length.setdefault(o.prompt_tokens, []).append(o.ttft_s)
    # The least spread of any length: noise that grows with the prefill is the engine's, not the network's.
    spreads = [robust_sd(v) for v in by_length.values() if len(v) >= 5]
    if not spreads:
        why = "no prompt length had 5 requests alone in flight: no spread measured"
        return fit, Param("rtt_jitter", 0.0, "ms", False, why)
    spread = min(spreads)
    if spread < 1e-6:  # exact data (a virtual run): a jitter of nothing would only break ties
        return fit, Param("rtt_jitter", 0.0, "ms", True, "TTFT does not vary at equal prompt lengths")
    scale = spread / HALF_NORMAL_SD
    rtt = max(0.0, fit.costs.rtt - HALF_NORMAL_MEAN * scale)
    note = Param(
        "rtt_jitter", scale * 1e3, "ms", True, "spread of TTFT at equal prompt lengths, alone in flight"
    )
    return replace(fit, costs=replace(fit.costs, rtt=rtt), jitter=scale), note


LIMIT_SCRAPES = 3  # a slot limit read from the server's gauge must show at this many scrapes


def _scheduler_limit(timelines: list[Any], given: int | None) -> Param:
    """The slot limit: given; or the server's running gauge where requests waited, if it shows the same
    value at LIMIT_SCRAPES scrapes or more and no fewer than the records saw decoding at once (one
    scrape in a request's admission, or a gauge that is not the slot limit, is no evidence); or the
    records, where a closed loop never had all its users decoding at once; else not identified."""
    name = "max_num_seqs"
    if given is not None:
        return Param(name, given, "requests", True, "given (--max-num-seqs)")
    seen = [(ld, max_decoding_at_once(tl)) for ld, tl in timelines]
    most = max(m for _, m in seen)
    waited = [v for ld, _ in timelines for v in ld.server_running_when_waiting if v > 0]
    gauge_note = ""
    if waited:
        top = max(waited)
        at_top = sum(1 for v in waited if v == top)
        if top < most:
            gauge_note = (
                f"; the server's running gauge showed requests waiting beside {top:.0f} running, but the "
                f"records show {most} decoding at once: that gauge is not the slot limit"
            )
        elif at_top < LIMIT_SCRAPES:
            gauge_note = (
                f"; the server's running gauge showed {top:.0f} running while requests waited at "
                f"{at_top} scrape(s) only ({LIMIT_SCRAPES} needed)"
            )
        else:
            how = f"server's running gauge while requests waited ({at_top} scrapes at {top:.0f})"
            return Param(name, top, "requests", True, how)
    if any(ld.concurrency is not None and m < ld.concurrency for ld, m in seen):
        return Param(
            name, most, "requests", True,
            f"never more than {most} decoding at once although a load kept more requests in flight"
            + gauge_note,
        )  # fmt: skip
    return Param(
        name, max(DEFAULT_MAX_NUM_SEQS, most), "requests", False,
        f"slot limit not identified: no load asked for more than ran ({most} at most at once); loads "
        "past that are undecided (sweep past it or pass --max-num-seqs)" + gauge_note,
    )  # fmt: skip
