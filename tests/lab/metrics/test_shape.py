"""describe() checks every step of a curve, not only its ends (§11.7's shapes)."""

from __future__ import annotations

import pytest

from minivllm.lab.metrics.shape import describe, monotone, segments

BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]


def test_every_step_is_checked():
    tpot_p50 = [15.5, 21.0, 30.2, 44.7, 54.5, 54.5, 54.6, 54.0]
    assert describe(BUDGETS, tpot_p50) == "rises to 1024, then flat (within ±0.7%)"
    assert not monotone(tpot_p50, "rises")  # the ends alone would say "rises"
    tpot_p99 = [17.4, 24.3, 36.4, 57.1, 88.6, 136.1, 141.5, 136.5]
    assert describe(BUDGETS, tpot_p99) == "rises to 4096, then falls to 8192 (-3.5%)"
    ttft = [14535, 9420, 6694, 5397, 4961, 4484, 4361, 4219]
    assert describe(BUDGETS, ttft) == "falls at every step" and monotone(ttft, "falls")
    expected = "flat to 2 (within ±0.5%), then rises to 3 (+18.8%), then flat (within ±0.4%)"
    assert describe([1, 2, 3, 4], [10, 10.1, 12, 12.1]) == expected


def test_edges():
    assert describe([1], [5.0]) == "one point" and segments([]) == []
    assert describe([1, 2], [0.0, 0.0]) == "flat (within ±0.0%)"
    with pytest.raises(ValueError, match="same length"):
        describe([1, 2], [1.0])
    with pytest.raises(ValueError, match="tol must be"):
        segments([1.0, 2.0], tol=1.5)
