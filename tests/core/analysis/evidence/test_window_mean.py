"""A gauge's mean over a window with its batch-means interval, and the decision it supports."""

from __future__ import annotations

from tokenpace.core.analysis.evidence.window_mean import window_mean


def test_a_window_mean_has_an_interval_from_batch_means_or_none_when_too_few():
    flat = window_mean([[t, 80.0] for t in range(20)], 0, 19)
    assert flat.mean == 80.0 and flat.ci == (80.0, 80.0) and flat.decide(70) == "above"
    noisy = window_mean([[t, 60.0 if t < 10 else 90.0] for t in range(20)], 0, 19)  # a slow swing
    assert noisy.mean == 75.0 and noisy.ci is not None and noisy.ci[0] < 70 < noisy.ci[1]
    assert noisy.decide(70) == "undecided"
    few = window_mean([[0, 10.0], [1, 12.0], [2, 11.0]], 0, 2)
    assert few.ci is None and few.decide(70) == "undecided"
    assert window_mean([[t, 10.0] for t in range(10)], 2, 5).n == 4  # the window's points only
