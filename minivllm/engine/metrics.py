"""Latency metrics from an EngineTrace: TTFT, TPOT, ITL, E2E percentiles (§11.9).

Definitions follow ../reference/serving_facts.md §1 and vLLM's request metrics
(``vllm/v1/metrics/stats.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation, as ``numpy.percentile``; nan when empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
