"""The progress benchmark's figure (bench/progress_cost.py): medians' ratio, with over without."""

from __future__ import annotations

from bench.progress_cost import AIM_RATIO, ratio


def test_the_ratio_is_of_the_medians():
    assert ratio([100.0, 98.0, 300.0], [100.0, 1.0, 100.0]) == 1.0
    assert ratio([99.0], [100.0]) == AIM_RATIO
