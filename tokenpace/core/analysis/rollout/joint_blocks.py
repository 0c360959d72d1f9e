"""The change between arms whose requests interleave in time, resampled in shared time blocks. Pure.

A host stall or a burst of traffic slows both arms of a gray release at once: their requests are
sent in the same moments. Each arm's own interval counts that wave (its requests move together),
but the change between them does not carry it: it cancels in the ratio. Treating the two arms'
noise as independent (their SEs added in quadrature) counts it twice. Here the change's SE is
measured by resampling time blocks jointly -- the same blocks for both arms -- so the noise common
to both cancels as it does in the data:

- Block length: the evidence module's rule (``evidence.dependence.block_length``: twice the
  integrated autocorrelation time, in requests) applied to the series whose dependence the change
  carries -- both arms' requests in send order, each its arm's signed share at or under its
  percentile (the change's influence) -- and at least ``MIN_BLOCK`` requests, so that a block can
  hold both arms. Where blocks that long capture less of that dependence than it holds, the
  spread is widened by the same factor the evidence module uses.
- Blocks are drawn with replacement, the same draw for both arms; within each, the arms keep their
  load bands (the candidate weighted to the reference's resampled load mix, as ``load_match``).
  The draws are made a chunk at a time, a draw a row (``CHUNK_ELEMENTS`` weights an arm a chunk,
  or one draw where an arm holds more): bounded memory at any size, a few array operations a chunk.
- Used only where ``MIN_SHARED_BLOCKS`` blocks hold requests of both arms: arms in different
  windows, or too few blocks to measure a spread, keep the independent SE. Never below what
  per-request sampling alone gives (``load_match``'s Woodruff SE, as if requests were independent)
  times the square root of the change's own dependence (tau of the series above, or where larger
  an arm's design effect from requests of one user or session, which time blocks do not keep
  together): a spread the blocks happened to draw narrow does not decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.core.analysis.evidence.clusters import cluster_design_effect
from tokenpace.core.analysis.evidence.dependence import block_length, captured
from tokenpace.core.analysis.evidence.samples import Samples
from tokenpace.core.analysis.rollout.matched_strata import ArmSamples
from tokenpace.core.stats import serial_correlation

MIN_BLOCK = 2  # requests of both arms together per block at least: a block can pair them
MIN_SHARED_BLOCKS = 20  # time blocks holding both arms before their spread is trusted
JOINT_RESAMPLES = 400  # draws of the blocks per metric (bounded work: one draw serves every percentile)
MIN_VALID = 0.9  # share of resamples that must yield both percentiles
CHUNK_ELEMENTS = 1 << 16  # resamples are drawn in chunks of at most this many weights an arm (a
# matrix of 512 KiB), or of one draw where an arm holds more values


@dataclass(frozen=True, slots=True)
class JointSE:
    """The change's SE on the log scale from shared time blocks, and the blocks it rests on."""

    se_log: float
    blocks: int  # time blocks holding both arms
    block_s: float  # their length, seconds
    tau: float = 1.0  # the change's variance inflation: requests that move together in time or by user

    def floored(self, independent_se: float) -> float:
        """The SE a verdict uses: never below per-request sampling's (``independent_se``, as if
        requests were independent) times the square root of the change's own dependence."""
        return max(self.se_log, independent_se * math.sqrt(self.tau))


@dataclass(frozen=True, slots=True)
class _Arm:
    values: np.ndarray  # sorted
    bands: np.ndarray  # index into the common bands, per value
    blocks: np.ndarray  # time block, per value (ITL gaps of one request share its block)


def _clusters(s: Samples) -> np.ndarray | None:
    """An id per request of its user or session (a request without one: its own); None: no keys."""
    if s.cluster is None:
        return None
    loose = iter(range(len(s.cluster)))
    codes: np.ndarray = np.unique([k or f"\0{next(loose)}" for k in s.cluster], return_inverse=True)[1]
    return codes


def _contrast(s_ref: Samples, s_cand: Samples, q: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Both arms' requests in send order: their send times and each one's term in the change
    (its share at or under its arm's percentile, less q, signed by arm, over the arm's count);
    and the larger arm's design effect from requests of one user or session (1: none)."""
    terms, sent, deff = [], [], 1.0
    for s, sign in ((s_ref, -1.0), (s_cand, 1.0)):
        assert s.sent_ns is not None
        values, sizes = np.concatenate(s.groups), np.array([len(g) for g in s.groups])
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        under = np.add.reduceat((values <= np.percentile(values, q)).astype(np.float64), starts) / sizes
        if (codes := _clusters(s)) is not None:
            deff = max(deff, cluster_design_effect(under, codes))
        terms.append(sign * (under - q / 100) / len(s.groups))
        sent.append(s.sent_ns)
    times = np.concatenate(sent)
    order = np.argsort(times, kind="stable")
    return times[order], np.concatenate(terms)[order], deff


def _arm(s: Samples, band_of: np.ndarray, start: float, width: float, k: int) -> _Arm:
    assert s.sent_ns is not None
    req_block = np.minimum(((s.sent_ns - start) // width).astype(np.int64), k - 1)
    counts = np.array([len(g) for g in s.groups])
    values = np.concatenate(s.groups)
    order = np.argsort(values, kind="stable")
    return _Arm(values[order], np.repeat(band_of, counts)[order], np.repeat(req_block, counts)[order])


def weighted_quantiles(
    values: np.ndarray, weights: np.ndarray, qs: np.ndarray, work: np.ndarray | None = None
) -> np.ndarray:
    """Per row of ``weights`` (draws x values, ``values`` sorted): the weighted quantiles at ``qs``
    (0-1), each value of positive weight a node at the midpoint of its weight in the cumulative
    share, linearly interpolated between the nodes either side (clamped at the ends); a value of
    zero weight is no node. NaN where a row has no weight. The nodes either side are found by one
    search of all rows' cumulative weights (each row set apart by an offset), then moved node by
    node to where their exact positions put them. ``weights`` is overwritten; ``work``: an array of
    its shape to work in (one is made where None)."""
    rows, n = weights.shape
    nodes = np.flatnonzero(weights > 0)  # flat indices, row after row
    if len(nodes) == 0:
        return np.full((rows, len(qs)), np.nan)
    cum = np.cumsum(weights, axis=1, out=work)
    total = cum[:, -1:].copy()
    weights *= 0.5
    mid = np.subtract(cum, weights, out=weights).ravel()  # each node's midpoint, as cum - w / 2
    bounds = np.searchsorted(nodes, np.arange(rows + 1) * n)
    first, end = bounds[:-1, None], bounds[1:, None]  # each row's nodes: nodes[first:end]
    norm = np.where(total > 0, total, 1.0)

    def position(i: np.ndarray) -> np.ndarray:  # of the node nodes[i] (clipped to the array)
        out: np.ndarray = mid[np.take(nodes, i, mode="clip")] / norm
        return out

    offset = np.arange(rows)[:, None] * (2 * float(total.max()) + 1)
    cum += offset
    ends = np.searchsorted(cum.ravel(), offset + qs * total, side="right")
    under = np.searchsorted(nodes, ends - 1, side="right")  # past the nodes ending at or before q
    while np.any(back := (under > first) & (position(under - 1) > qs)):
        under -= back
    while np.any(ahead := (under < end) & (position(under) <= qs)):
        under += ahead  # past the nodes at or before q, exactly
    lo, hi = np.take(nodes, under - 1, mode="clip"), np.take(nodes, under, mode="clip")
    x0, y0, y1 = position(under - 1), values[lo % n], values[hi % n]
    with np.errstate(divide="ignore", invalid="ignore"):  # only where clamped at an end
        inner = (y1 - y0) / (position(under) - x0) * (qs - x0) + y0
    found: np.ndarray = np.where(under == first, y1, np.where(under == end, y0, inner))
    found[first[:, 0] == end[:, 0]] = np.nan
    return found


def _draws(
    ref: _Arm, cand: _Arm, cells: np.ndarray, reps: np.ndarray, qs: np.ndarray, work: np.ndarray
) -> np.ndarray:
    """log(cand/ref) at each percentile of each resample (a row each: ``reps`` counts how often each
    block was drawn), those where a band holds both arms and both percentiles are positive only.
    ``cells``: how many values each arm has in each time block and band (k x 2 bands); ``work``:
    two flat arrays to work in, each of a weight per value and draw at least."""
    drawn = reps.astype(np.float64)
    tot_ref, tot_cand = np.split(drawn @ cells, 2, axis=1)
    both = (tot_ref > 0) & (tot_cand > 0)
    ok = both.any(axis=1)
    held = np.where(both, tot_ref, 0.0)
    shares = held / np.where(ok, np.sum(held, axis=1), 1.0)[:, None]
    quantiles = []
    for arm, tot in ((ref, tot_ref), (cand, tot_cand)):
        weights, scratch = (w[: drawn.shape[0] * len(arm.values)].reshape(-1, len(arm.values)) for w in work)
        # each value's weight: its block's draws times its band's factor (np.take: row by row)
        np.take(drawn, arm.blocks, axis=1, out=weights, mode="clip")
        weights *= np.take(shares / np.where(both, tot, 1.0), arm.bands, axis=1, out=scratch, mode="clip")
        quantiles.append(weighted_quantiles(arm.values, weights, qs, scratch))
    a, b = quantiles
    ok &= np.all(a > 0, axis=1) & np.all(b > 0, axis=1)
    out: np.ndarray = np.log(b[ok] / a[ok])
    return out


def _cells(arm: _Arm, k: int, nb: int) -> np.ndarray:
    """How many of the arm's values each time block holds in each band (k x nb)."""
    return np.bincount(arm.blocks * nb + arm.bands, minlength=k * nb).reshape(k, nb).astype(np.float64)


def joint_ses(
    ref_arm: ArmSamples,
    cand_arm: ArmSamples,
    bands: list[int],
    qs: Sequence[float],
    seed: int = 0,
) -> dict[float, JointSE]:
    """Per percentile ``q`` (0-100) of ``qs``: the SE of log(cand/ref) of the arms' metric over
    the common ``bands`` from time blocks resampled jointly (one block length for all, the longest
    any needs, as the evidence module does); empty where fewer than ``MIN_SHARED_BLOCKS`` blocks
    hold both arms (disjoint windows, long dependence) or the percentiles cannot be resampled."""
    s_ref, band_ref = ref_arm.of_bands(bands)
    s_cand, band_cand = cand_arm.of_bands(bands)
    if len(s_ref.groups) < 2 or len(s_cand.groups) < 2 or not qs:  # no common bands: none here
        return {}
    contrasts = [_contrast(s_ref, s_cand, q) for q in qs]
    fits = [(deff, *serial_correlation(terms)) for _, terms, deff in contrasts]
    times = contrasts[0][0]
    block = max(block_length([tau for _, tau, _ in fits], len(times)), MIN_BLOCK)
    start, end = float(times[0]), float(times[-1])
    width = max(block * (end - start) / max(len(times) - 1, 1), 1.0)
    k = max(1, math.ceil((end - start) / width))
    ref, cand = _arm(s_ref, band_ref, start, width, k), _arm(s_cand, band_cand, start, width, k)
    held = (np.bincount(ref.blocks, minlength=k) > 0) & (np.bincount(cand.blocks, minlength=k) > 0)
    shared = int(np.sum(held))
    if shared < MIN_SHARED_BLOCKS:
        return {}
    rng = np.random.default_rng(seed)
    at = np.asarray(qs, dtype=np.float64) / 100
    cells = np.hstack([_cells(ref, k, len(bands)), _cells(cand, k, len(bands))])
    values = max(len(ref.values), len(cand.values))
    chunks = -(-JOINT_RESAMPLES * max(values, k) // CHUNK_ELEMENTS)
    rows = -(-JOINT_RESAMPLES // chunks)  # draws a chunk: CHUNK_ELEMENTS weights an arm, or one draw
    work = np.empty((2, rows * values))  # reused by every chunk: fresh memory costs more than the work
    logs = []
    for done in range(0, JOINT_RESAMPLES, rows):  # the same blocks for both arms, a draw a row
        m = min(rows, JOINT_RESAMPLES - done)
        picks = (rng.integers(0, k, size=(m, k)) + np.arange(m)[:, None] * k).ravel()
        logs.append(_draws(ref, cand, cells, np.bincount(picks, minlength=m * k).reshape(m, k), at, work))
    found = np.concatenate(logs)
    if len(found) < MIN_VALID * JOINT_RESAMPLES:
        return {}
    sds = np.std(found, axis=0, ddof=1)
    out = {}
    for q, (deff, tau, rho), sd in zip(qs, fits, sds, strict=True):
        widen = math.sqrt(max(1.0, tau / max(captured(rho, block), 1.0)))  # what blocks of ``block`` miss
        out[float(q)] = JointSE(widen * float(sd), shared, width / 1e9, max(tau, deff))
    return out
