"""validate.speed_ran: which speed a held-out load ran at, told from its own waves, and what it says
where nothing tells it (no wave, a prediction without a median TPOT)."""

from __future__ import annotations

from tokenpace.app.calibration.validate import speed_ran
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.record import RequestRecord
from tokenpace.sim.virtual_time.replay import Prediction

MS = 1_000_000


def _load(step_ms: float, n: int = 8) -> MeasuredLoad:
    """n requests one after another, 12 tokens each at step_ms a token: n waves."""
    recs = []
    for w in range(n):
        sent = (w + 1) * 1000 * MS
        tokens = [sent + 20 * MS + k * round(step_ms * MS) for k in range(12)]
        recs.append(
            RequestRecord(
                request_id=str(w), index=w, sent_ns=sent, first_token_ns=tokens[0], end_ns=tokens[-1],
                token_ns=tokens, output_tokens_server=12, prompt_tokens=64,
            )
        )  # fmt: skip
    return MeasuredLoad(label="c=1", records=tuple(recs), concurrency=1)


def _tpot(ms: float, percentile: int = 50) -> list[Prediction]:
    return [Prediction("c=1", "tpot", percentile, ms, ms, ms, 0.0)]


def test_the_nearer_speed_in_ratio_is_the_one_it_ran() -> None:
    ran, why = speed_ran(_load(70.0), _tpot(20.0), _tpot(80.0))
    assert ran == "slow" and "judged against the slow speed's prediction" in why
    assert "chosen from its own waves" in why  # not a prediction: said so
    assert speed_ran(_load(30.0), _tpot(20.0), _tpot(80.0))[0] == "fast"
    # the boundary is halfway in ratio (40 ms: 2x either way), not in milliseconds (50)
    assert speed_ran(_load(39.0), _tpot(20.0), _tpot(80.0))[0] == "fast"
    assert speed_ran(_load(41.0), _tpot(20.0), _tpot(80.0))[0] == "slow"


def test_without_a_median_tpot_or_a_wave_it_says_so_and_judges_the_fast_speed() -> None:
    ran, why = speed_ran(_load(70.0), _tpot(20.0, percentile=95), _tpot(80.0))
    assert ran == "fast" and "nothing to tell which speed" in why
    assert speed_ran(_load(70.0), _tpot(20.0), _tpot(-5.0))[0] == "fast"  # a slow speed priced at nothing
    no_stream = MeasuredLoad(label="c=1", records=(), concurrency=1)
    assert speed_ran(no_stream, _tpot(20.0), _tpot(80.0))[0] == "fast"
