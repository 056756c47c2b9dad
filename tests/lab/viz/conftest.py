"""Fixtures: the §11.1 scene on the fake runner, and a trace written out by hand."""

from __future__ import annotations

import pytest

from minivllm.lab.sim.run import run_workload
from minivllm.metrics.trace import EngineTrace, RequestRecord, StepRecord
from tests.helpers.viz import SCENE, make_engine, requests


@pytest.fixture
def scene_trace() -> EngineTrace:
    """Three chats decoding, then a 150-token prompt lands (budget 64: it is chunked)."""
    engine = make_engine()
    run_workload(engine, requests(SCENE))
    return engine.trace


@pytest.fixture
def hand_trace() -> EngineTrace:
    """Two requests, four steps, one preemption, written out by hand (times in seconds)."""
    t = EngineTrace()
    t.requests["a"] = RequestRecord(
        "a", 0.0, 6, first_scheduled_time=1.0, token_times=[3.0, 4.0], finish_time=4.0, finish_reason="length"
    )
    t.requests["b"] = RequestRecord("b", 0.5, 4, first_scheduled_time=1.0, token_times=[2.0], num_preemptions=1)
    common = dict(token_budget=8, spec_tokens={}, kv_usage=0.5)
    t.steps = [
        StepRecord(
            0,
            1.0,
            2.0,
            prefill_tokens={"a": 4, "b": 4},
            decode_tokens={},
            num_running=2,
            num_waiting=0,
            preempted=[],
            new_requests=["a", "b"],
            prefix_cache_hit_tokens={"a": 0, "b": 0},
            **common,
        ),
        StepRecord(
            1,
            2.0,
            3.0,
            prefill_tokens={"a": 2},
            decode_tokens={},
            num_running=1,
            num_waiting=1,
            preempted=["b"],
            new_requests=[],
            prefix_cache_hit_tokens={},
            **common,
        ),
        StepRecord(
            2,
            3.0,
            4.0,
            prefill_tokens={"b": 1},
            decode_tokens={"a": 1},
            num_running=2,
            num_waiting=0,
            preempted=[],
            new_requests=["b"],
            prefix_cache_hit_tokens={"b": 4},
            finished=["a"],
            **common,
        ),
    ]
    return t
