"""What a calibrated profile can vouch for, read from its provenance: where its calibration saw the
engine, which of its values were defaulted rather than identified, and whether its fit passed the
quality gate. `sim --validate`, `sim --virtual` (its table and predicted sweeps), `plan` and `select`
judge a load past these as undecided, with the reason, never as a pass or a miss.

A shipped profile vouches for nothing about the user's engine (it is not calibrated to it) and is
not limited here: its outputs already say "shipped profile, not calibrated".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenpace.sim.profiles.profile import Profile

PROMPT_SLACK = 1.05  # prompts up to 5 % longer than the calibration's longest are within it
BATCH_SLACK = 0.5  # half a request: the calibration's observed batch is a mean over steps
# An open loop's arrivals that may find the calibration's most-at-once already in flight: past this
# share, a slot limit that low (nothing showed it is higher) would queue enough of them to move a tail
# percentile, which a model without that limit cannot predict.
ARRIVALS_PAST_SEEN = 0.01


@dataclass(frozen=True, slots=True)
class Offered:
    """What an open loop asks of an engine, from its rate alone (not from a prediction's own queue):
    ``in_flight`` requests on average (rate x ``per_request_s``, the model's time a request takes at
    the calibration's largest batch: Little's law), arriving with this ``dispersion`` (the variance
    of the count in flight over its mean: 1 for Poisson arrivals, more for burstier ones)."""

    rate: float  # req/s per replica
    per_request_s: float  # math.inf: the prefills alone outrun the engine
    dispersion: float = 1.0

    @property
    def in_flight(self) -> float:
        return self.rate * self.per_request_s


def share_at_least(mean: float, k: int, dispersion: float = 1.0) -> float:
    """P(N >= k) for a count N in flight with this mean: Poisson (an infinite-server queue fed by
    Poisson arrivals, whatever the service times), or, over-dispersed, the negative binomial with
    variance ``dispersion`` x mean. Under-dispersed arrivals (constant) are taken as Poisson: an
    upper bound."""
    if k <= 0:
        return 1.0
    if not math.isfinite(mean):
        return 1.0
    if mean <= 0:
        return 0.0
    if dispersion <= 1.0:
        term = math.exp(-mean)
        below = 0.0
        for i in range(k):
            below += term
            term *= mean / (i + 1)
    else:
        p, r = 1.0 / dispersion, mean / (dispersion - 1.0)
        term = p**r
        below = 0.0
        for i in range(k):
            below += term
            term *= (r + i) / (i + 1) * (1.0 - p)
    return max(0.0, 1.0 - below)


@dataclass(frozen=True, slots=True)
class ProfileLimits:
    calibrated: bool
    poor_fit: tuple[str, ...] = ()  # the fit-quality gate's problems (a profile written with --force)
    slot_limit_identified: bool = True
    slot_note: str = ""  # why the slot limit was not identified
    slot_limit: int = 0  # the profile's max_num_seqs (identified or defaulted)
    batch_seen: float = 0.0  # the most requests the calibration saw decoding at once
    prompt_seen: float = 0.0  # the longest prompt it saw (tokens)
    engine_moved: float = 0.0  # how far the engine's speed surely moved during it (relative)
    # of an engine seen at two speeds, the one these predictions run: fast | slow | each (a validation's)
    speed: str = ""
    slow_extra_ms: float = 0.0  # what the slow speed adds to a step

    def caveats(self) -> list[str]:
        """What every prediction from this profile carries, in one line each."""
        out = [f"the engine model does not describe this engine: {p}" for p in self.poor_fit]
        if self.calibrated and not self.slot_limit_identified:
            out.append(
                f"slot limit not identified (the calibration saw {self.batch_seen:.0f} decoding at once at "
                "most): loads with more in flight are undecided; sweep past it or pass --max-num-seqs"
            )
        if self.engine_moved > 0:
            out.append(f"the engine's speed moved {self.engine_moved:.0%} or more during the calibration")
        if self.speed == "each":
            out.append(
                f"the engine was seen at two speeds (the slow one {self.slow_extra_ms:+.3g} ms a step): "
                "which a load gets is not predicted, so a load that held one is judged on its later requests "
                "sent after its first third ended, at the level that third ran (a load too short for that: "
                "at the speed nearer its waves); the profile is never said to hold on such loads"
            )
        elif self.speed == "level":
            out.append(
                f"these predictions run {self.slow_extra_ms:+.3g} ms a step over the fast speed (a level)"
            )
        elif self.speed:
            other = "--speed slow for the slow one" if self.speed == "fast" else "without it, the fast one"
            out.append(
                f"the engine was seen at two speeds (the slow one {self.slow_extra_ms:+.3g} ms a step) and "
                f"which a load gets is not known: these are the {self.speed} speed's predictions ({other})"
            )
        return out

    def pass_unproven(self) -> list[str]:
        """Why no prediction from this profile proves a line is met, whatever the load (select makes
        such a pass undecided): the fast speed's predictions of an engine also seen running slower."""
        if self.speed == "fast":
            return [
                "a pass on the fast speed's predictions only: the engine was also seen running slower "
                "and which speed a load gets is not known (sim --speed slow predicts the slow one)"
            ]
        return []

    def beyond(
        self,
        in_flight: float | None,
        prompt: float | None,
        decoding: float | None = None,
        offered: Offered | None = None,
    ) -> str:
        """Why a load with this many requests in flight (and decoding at once: by default as many as
        the slot limit lets in) and prompts this long lies past what the profile can vouch for ("" when
        it does not). An open loop's ``offered`` load is judged on its own against a slot limit not
        identified (``offered_beyond``)."""
        if not self.calibrated:
            return ""
        if self.poor_fit:
            return "the engine model does not describe this engine (its fit failed the quality gate)"
        why = []
        past = self.offered_beyond(offered) if offered is not None else ""
        if past:
            why.append(past)
            in_flight = decoding = None  # said, by the load offered
        if decoding is None and in_flight is not None:
            decoding = min(in_flight, self.slot_limit) if self.slot_limit else in_flight
        if (
            in_flight is not None
            and in_flight > self.batch_seen + BATCH_SLACK
            and not self.slot_limit_identified
        ):
            why.append(
                f"{in_flight or 0:.0f} in flight, the calibration saw {self.batch_seen:.0f} at most and no "
                "slot limit: sweep past it or pass --max-num-seqs"
            )
        elif decoding is not None and decoding > self.batch_seen + BATCH_SLACK:
            why.append(
                f"{decoding:.0f} decoding at once, fitted up to {self.batch_seen:.0f}: the per-sequence cost "
                "is extrapolated"
            )
        if prompt is not None and self.prompt_seen and prompt > self.prompt_seen * PROMPT_SLACK:
            why.append(f"prompts up to {prompt:.0f} tokens, fitted up to {self.prompt_seen:.0f}")
        return "; ".join(why)

    def offered_beyond(self, offered: Offered) -> str:
        """Why an open loop's offered load lies past the capacity the calibration saw, when no slot
        limit was identified ("" when it does not): more than ARRIVALS_PAST_SEEN of its arrivals would
        find the calibration's most-at-once already in flight. Judged on the rate and the model's time
        a request takes at the calibration's batch, never on the prediction's own count in flight: a
        model without the engine's real slot limit never queues, so its count stays low where the
        engine's would grow."""
        if not self.calibrated or self.slot_limit_identified or self.batch_seen <= 0:
            return ""
        seen = max(1, round(self.batch_seen))
        share = share_at_least(offered.in_flight, seen, offered.dispersion)
        if share <= ARRIVALS_PAST_SEEN:
            return ""
        if not math.isfinite(offered.per_request_s):
            load = f"{offered.rate:.3g} req/s is more than the model's prefills alone can carry"
        else:
            load = (
                f"{offered.rate:.3g} req/s x {offered.per_request_s * 1e3:.4g} ms a request at the "
                f"calibration's batch of {self.batch_seen:.0f} keeps {offered.in_flight:.2g} in flight on "
                f"average: {share:.0%} of its arrivals would find {seen} or more there"
            )
        return (
            f"offered load past what the calibration saw ({load}; it saw {self.batch_seen:.0f} at once at "
            "most and no slot limit): sweep past it or pass --max-num-seqs"
        )


def limits_of(profile: Profile) -> ProfileLimits:
    prov = profile.provenance or {}
    if not prov:
        return ProfileLimits(calibrated=False)
    observed = prov.get("observed") or {}
    defaulted = prov.get("defaulted") or {}
    quality = prov.get("fit_quality") or {}
    residuals = prov.get("residuals") or {}
    seen = observed.get("decoding_at_once") or observed.get("batch") or [0, 0]
    return ProfileLimits(
        calibrated=True,
        poor_fit=tuple(str(p) for p in quality.get("problems") or ()),
        slot_limit_identified="max_num_seqs" not in defaulted,
        slot_note=str(defaulted.get("max_num_seqs", "")),
        slot_limit=profile.engine.max_num_seqs,
        batch_seen=float(seen[1]),
        prompt_seen=float((observed.get("prompt_tokens") or [0, 0])[1]),
        engine_moved=float(residuals.get("decode_drift", 0.0)),
        speed=str(prov.get("running_speed") or ("fast" if profile.has_slow_speed else "")),
        slow_extra_ms=float(prov.get("slow_step_extra_ms") or profile.efficiency.slow_step_extra_ms),
    )
