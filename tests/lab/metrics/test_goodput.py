"""Goodput under a TPOT SLO (§11.7): only requests within the SLO count, over the run's duration."""

from __future__ import annotations

import pytest

from minivllm.lab.metrics.goodput import goodput, num_within_slo, request_tpot
from minivllm.metrics.trace import EngineTrace, RequestRecord


def trace_of(*records: RequestRecord) -> EngineTrace:
    t = EngineTrace()
    for r in records:
        t.requests[r.request_id] = r
    return t


def rec(rid: str, times: list[float], finish_reason: str = "length") -> RequestRecord:
    return RequestRecord(rid, 0.0, 10, token_times=times, finish_time=times[-1], finish_reason=finish_reason)


def test_goodput_counts_the_output_tokens_of_requests_within_the_slo_by_hand():
    fast = rec("fast", [0.1, 0.12, 0.14, 0.16, 0.18])  # TPOT 20 ms, 5 tokens
    slow = rec("slow", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])  # TPOT 100 ms, 10 tokens
    one = rec("one", [0.05])  # a single token has no TPOT: within any SLO
    t = trace_of(fast, slow, one)
    assert request_tpot(fast) == pytest.approx(0.02) and request_tpot(one) == 0.0
    assert num_within_slo(t, 0.05) == 2 and num_within_slo(t, 0.1 + 1e-9) == 3
    assert goodput(t, 0.05) == pytest.approx((5 + 1) / 1.0)  # duration: first arrival 0 -> last finish 1.0
    assert goodput(t, 0.2) == pytest.approx(16 / 1.0)


def test_aborted_requests_and_empty_traces_count_nothing():
    t = trace_of(rec("a", [0.1, 0.2], finish_reason="abort"), rec("b", [0.1, 0.3]))
    assert num_within_slo(t, 1.0) == 1 and goodput(t, 1.0) == pytest.approx(2 / 0.3)
    assert goodput(EngineTrace(), 1.0) == 0.0
