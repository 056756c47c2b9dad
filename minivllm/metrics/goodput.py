"""Goodput under a TPOT SLO: output tokens per second of the requests that met it (§11.7).

Sarathi-Serve (§5, "capacity under an SLO") and DistServe rank configurations by the load they
serve within a latency objective, not by raw throughput. Here, for one run: the output tokens of
completed requests whose TPOT (metrics.summary's definition) is at most ``tpot_slo_s``, over the
run's duration (first arrival to last finish, as ``summarize``). A request with a single output
token has no TPOT and counts as within the SLO.
"""

from __future__ import annotations

from minivllm.metrics.trace import EngineTrace, RequestRecord


def request_tpot(r: RequestRecord) -> float:
    """(last token - first token) / (output tokens - 1); 0.0 for a request with fewer than two tokens."""
    if r.num_output_tokens < 2:
        return 0.0
    return (r.token_times[-1] - r.token_times[0]) / (r.num_output_tokens - 1)


def _done(trace: EngineTrace) -> list[RequestRecord]:
    return [r for r in trace.requests.values() if r.finish_time is not None and r.finish_reason != "abort"]


def num_within_slo(trace: EngineTrace, tpot_slo_s: float) -> int:
    """Completed requests whose TPOT is at most ``tpot_slo_s`` seconds."""
    return sum(request_tpot(r) <= tpot_slo_s for r in _done(trace))


def goodput(trace: EngineTrace, tpot_slo_s: float) -> float:
    """Output tokens per second of the completed requests whose TPOT met ``tpot_slo_s`` (0.0 for no run)."""
    recs = trace.requests.values()
    finishes = [r.finish_time for r in recs if r.finish_time is not None]
    if not finishes:
        return 0.0
    duration = max(finishes) - min(r.arrival_time for r in recs)  # as summarize(): first arrival -> last finish
    if not duration > 0:
        return 0.0
    return sum(r.num_output_tokens for r in _done(trace) if request_tpot(r) <= tpot_slo_s) / duration
