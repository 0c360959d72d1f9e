"""validate at two speeds: the level a held-out load ran at, set by its first third and the rest judged
(level_from_start); speed_ran, for a load too short for that: which speed it ran at, told from its own
waves, and what it says where nothing tells it (no wave, a prediction without a median TPOT)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenpace.app.calibration.validate import Level, Validation, level_from_start, speed_ran, validate_loads
from tokenpace.core.analysis.calibration.engine_obs import MeasuredLoad
from tokenpace.core.record import RequestRecord
from tokenpace.sim import get_profile
from tokenpace.sim.model.costmodel import CostModel
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


def _two_speed_profile():
    return get_profile().with_overrides(efficiency={"slow_step_extra_ms": 60.0})


def test_a_load_sets_its_level_with_its_first_third_and_is_judged_on_the_rest() -> None:
    """30 requests one after another at 70 ms a token: the first 10 set the level (+60-odd ms over the
    fast law, nearer the slow speed) and only those sent after they ended are judged: the first ten's
    slow first tokens (300 ms) are in no measured row, and the TPOT predicted is the level's."""
    profile = _two_speed_profile()
    level = level_from_start(profile, _load(70.0, n=30))
    assert isinstance(level, Level) and level.skip == 10 and level.speed == "slow"
    fast = CostModel(profile).decode_step_seconds(1, 70) * 1e3
    assert level.extra_ms == pytest.approx(70.0 - fast, abs=2.0)
    assert "judged on its 20 requests sent after its first 10 ended, at the level those ran" in level.note
    load = _load(70.0, n=30)
    late = [replace(r, token_ns=[t + 280 * MS for t in r.token_ns]) for r in load.records[:10]]
    late = [replace(r, first_token_ns=r.token_ns[0], end_ns=r.token_ns[-1]) for r in late]
    result = validate_loads(profile, [("made up", replace(load, records=(*late, *load.records[10:])))])
    assert result.speeds == {"c=1": "slow"}
    p50 = {r.prediction.metric: r.prediction for r in result.rows if r.prediction.percentile == 50}
    assert p50["ttft"].measured_high_ms < 25  # the judged part's 20 ms, none of the 300
    assert p50["tpot"].predicted_ms == pytest.approx(70.0, rel=0.05)


def test_a_load_too_short_for_a_level_is_judged_at_the_speed_nearer_its_waves() -> None:
    """Too few requests after the first third ended, or too few decode phases in it: the whole load is
    judged at the fitted speed nearer its waves (speed_ran), and the note says why."""
    profile = _two_speed_profile()
    short = level_from_start(profile, _load(70.0, n=3))
    assert isinstance(short, str) and "too short to set its level from its first 1 requests" in short
    few = level_from_start(profile, _load(70.0, n=8))
    assert isinstance(few, str) and "its first 2 requests held 2 decode phases (5 needed)" in few
    result = validate_loads(profile, [("made up", _load(70.0, n=8))])
    assert result.speeds == {"c=1": "slow"} and len(result.rows) == 6
    note = result.notes["c=1"][-1]
    assert note.startswith("its first 2 requests held 2 decode phases") and "ran at the slow speed" in note


def test_a_profile_is_never_said_to_hold_on_loads_judged_at_a_speed_read_from_them() -> None:
    judged_at_a_read_speed = Validation("p", 0.1, loads={"a": "met"}, speeds={"a": "slow"})
    assert judged_at_a_read_speed.verdict == "undecided" and judged_at_a_read_speed.exit_code == 5
    assert Validation("p", 0.1, loads={"a": "met"}, speeds={"a": "one"}).verdict == "holds"
    assert Validation("p", 0.1, loads={"a": "missed"}, speeds={"a": "fast"}).verdict == "fails"
