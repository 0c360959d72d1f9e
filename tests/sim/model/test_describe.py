"""`tokenpace sim --list-profiles` names each batch size's decode step once."""

from __future__ import annotations

import re

from tokenpace.sim.model.describe import profile_figures
from tokenpace.sim.profiles.profile import get_profile, profile_names


def test_each_batch_size_is_listed_once_batch_1_first():
    for name in profile_names():
        figures = profile_figures(get_profile(name))
        batches = re.findall(r"ms at (?:batch )?(\d+)", figures.split(" (1k context)")[0])
        assert batches[0] == "1" and len(batches) == len(set(batches)), (name, figures)
