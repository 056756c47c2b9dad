"""A hand-built EngineTrace (every number of its metrics is worked out by hand in tests/lab/metrics/test_summary.py)
and the StepRecord builder it is written with."""

from __future__ import annotations

from minivllm.metrics.trace import EngineTrace, RequestRecord, StepRecord


def step(
    i,
    start,
    end,
    *,
    prefill=None,
    decode=None,
    spec=None,
    running=0,
    waiting=0,
    kv=0.0,
    preempted=(),
    new=(),
    hits=None,
    budget=16,
):
    return StepRecord(
        i,
        start,
        end,
        budget,
        prefill or {},
        decode or {},
        spec or {},
        running,
        waiting,
        kv,
        list(preempted),
        list(new),
        hits or {},
    )


def hand_trace() -> EngineTrace:
    """A: 4 tokens with one long gap; B: 2 tokens; C: 1 token; D: aborted while waiting."""
    t = EngineTrace()
    t.requests = {
        "A": RequestRecord("A", 0.0, 10, 0.5, [1.0, 1.2, 1.4, 2.8], 2.8, "length"),
        "B": RequestRecord("B", 0.5, 20, 1.0, [2.0, 2.1], 2.1, "stop", num_cached_tokens=8),
        "C": RequestRecord("C", 1.0, 5, 2.0, [3.0], 3.0, "length"),
        "D": RequestRecord("D", 1.5, 8, None, [], 2.0, "abort"),
    }
    t.steps = [
        step(0, 0.5, 1.0, prefill={"A": 10}, running=1, waiting=1, kv=0.25, new=["A"], hits={"A": 0}),
        step(1, 1.0, 2.0, prefill={"B": 12}, decode={"A": 1}, running=2, waiting=2, kv=0.5, new=["B"], hits={"B": 8}),
        step(
            2,
            2.0,
            3.0,
            prefill={"C": 5},
            spec={"B": 2},
            running=0,
            waiting=0,
            kv=0.125,
            preempted=["A"],
            new=["C"],
            hits={"C": 0},
            budget=0,
        ),
    ]
    return t
