"""Statistics over an EngineTrace that both the server and the lab read: the percentile helper and the prefix
cache's query / hit token counts (§11.9).

Mirrors the counting of ``vllm/v1/metrics/stats.py`` (``PrefixCacheStats``); the summary tables built on these
are the lab's (``minivllm/lab/metrics/summary.py``), the Prometheus exposition the server's
(``minivllm/serving/metrics/prometheus.py``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from minivllm.metrics.trace import EngineTrace


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation, as ``numpy.percentile``; nan when empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def prefix_cache_tokens(trace: EngineTrace) -> tuple[int, int]:
    """(queried, hit) tokens: each admission (new or resumed) queries its tokens so far, as vLLM [0.9.2+]
    ``PrefixCacheStats`` does; a resumed request's tokens = prompt + outputs produced before that step."""
    queries = hits = 0
    for step in trace.steps:
        for req_id in step.new_requests:
            rec = trace.requests[req_id]
            queries += rec.num_prompt_tokens + bisect_left(rec.token_times, step.end)
        hits += sum(step.prefix_cache_hit_tokens.values())
    return queries, hits
