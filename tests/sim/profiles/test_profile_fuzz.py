"""The fuzzer on profiles and traces: hypothesis edits a shipped profile's fields to hostile values
(fuzz_files.py) and draws trace timestamps; each file is either refused with one line (ProfileError,
DatasetError, the replay's bound) or gives an engine whose derived costs are finite: never another
exception."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
import fuzz_files  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tokenpace.adapters.datasets.rows import DatasetError  # noqa: E402
from tokenpace.adapters.datasets.trace import read_trace  # noqa: E402
from tokenpace.core.workload.trace import replay_problem  # noqa: E402
from tokenpace.sim.profiles.profile import ProfileError, get_profile, load_profile_file  # noqa: E402
from tokenpace.sim.profiles.profile_file import profile_to_toml  # noqa: E402

SHORT = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
BASE = profile_to_toml(get_profile())


@SHORT
@given(edits=fuzz_files.profile_edits)
def test_a_hostile_profile_is_refused_or_finite(tmp_path_factory: Any, edits: list[tuple[str, str]]) -> None:
    text = BASE
    for key, value in edits:
        line = f"{key} = {value}"
        text = re.sub(rf"^{key} = .*$", lambda _m: line, text, count=1, flags=re.M)  # noqa: B023
    path: Path = tmp_path_factory.mktemp("p") / "p.toml"
    path.write_text(text)
    try:
        profile = load_profile_file(path)
    except ProfileError as exc:
        assert "\n" not in str(exc)
        return
    costs = (profile.eff_flops, profile.eff_bw, profile.model.weight_bytes_read(8))
    assert all(math.isfinite(c) for c in costs) and profile.eff_flops > 0 and profile.eff_bw > 0
    assert profile.num_gpu_blocks >= 0


@SHORT
@given(stamps=st.lists(fuzz_files.timestamps, min_size=1, max_size=5))
def test_hostile_trace_timestamps_are_refused_or_replayable(tmp_path_factory: Any, stamps: list[str]) -> None:
    path: Path = tmp_path_factory.mktemp("t") / "t.csv"
    path.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{t},10,5\n" for t in stamps))
    try:
        rows, _ = read_trace(path)
    except DatasetError as exc:
        assert "\n" not in str(exc)
        return
    assert all(math.isfinite(r.timestamp_s) for r in rows)
    why = replay_problem(rows)
    if why is None:  # what a run would wait for: within the bound
        assert rows[-1].timestamp_s - rows[0].timestamp_s <= 7 * 86_400
