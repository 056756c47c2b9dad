"""Goodput under a TPOT SLO: output tokens per second of the requests that met it (§11.7).

Sarathi-Serve (§5, "capacity under an SLO") and DistServe rank configurations by the load they
serve within a latency objective, not by raw throughput. Here, for one run: the output tokens of
completed requests whose TPOT (metrics.summary's definition) is at most ``tpot_slo_s``, over the
run's duration (first arrival to last finish, as ``summarize``). A request with a single output
token has no TPOT and counts as within the SLO.
"""

from __future__ import annotations

from minivllm.lab.metrics.summary import completed_requests, run_duration
from minivllm.metrics.trace import EngineTrace, RequestRecord


def request_tpot(r: RequestRecord) -> float:
    """``RequestRecord.tpot``, with 0.0 for a request with fewer than two tokens (it meets any SLO)."""
    return 0.0 if r.tpot is None else r.tpot


def num_within_slo(trace: EngineTrace, tpot_slo_s: float) -> int:
    """Completed requests whose TPOT is at most ``tpot_slo_s`` seconds."""
    return sum(request_tpot(r) <= tpot_slo_s for r in completed_requests(trace))


def goodput(trace: EngineTrace, tpot_slo_s: float) -> float:
    """Output tokens per second of the completed requests whose TPOT met ``tpot_slo_s`` (0.0 for no run)."""
    duration = run_duration(trace)  # as summarize(): first arrival -> last finish (nan before any finish)
    if not duration > 0:
        return 0.0
    done = completed_requests(trace)
    return sum(r.num_output_tokens for r in done if request_tpot(r) <= tpot_slo_s) / duration
