"""Metrics from hand-built EngineTraces, every number worked out by hand (§11.9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from minivllm.lab.metrics.summary import (
    STALL_FACTOR,
    Distribution,
    generation_stalls,
    step_series,
    summarize,
)
from minivllm.metrics.stats import percentile, prefix_cache_tokens
from minivllm.metrics.trace import EngineTrace, RequestRecord
from tests.helpers.traces import hand_trace, step


def check(d: Distribution, values: list[float], by_hand: tuple[float, float, float, float, float]) -> None:
    assert (d.p50, d.p95, d.p99, d.max, d.mean) == pytest.approx(by_hand)
    assert d.count == len(values)
    np_values = (*np.percentile(values, [50, 95, 99]), max(values), np.mean(values))
    assert (d.p50, d.p95, d.p99, d.max, d.mean) == pytest.approx(np_values)


def test_percentile_interpolates_like_numpy():
    xs = [3.0, 1.0, 4.0, 1.5, 9.0]
    for q in (0, 10, 50, 90, 95, 99, 100):
        assert percentile(xs, q) == pytest.approx(np.percentile(xs, q))
    assert math.isnan(percentile([], 50))
    assert all(math.isnan(v) for v in vars(Distribution.of([])).values() if isinstance(v, float))


def test_latency_distributions_by_hand():
    s = summarize(hand_trace())
    # TTFT: A 1.0, B 1.5, C 2.0 (D has no token)
    check(s.ttft, [1.0, 1.5, 2.0], (1.5, 1.5 + 0.5 * 0.9, 1.5 + 0.5 * 0.98, 2.0, 1.5))
    # TPOT: A (2.8 - 1.0) / 3 = 0.6, B (2.1 - 2.0) / 1 = 0.1; C has one token
    check(s.tpot, [0.1, 0.6], (0.35, 0.1 + 0.5 * 0.95, 0.1 + 0.5 * 0.99, 0.6, 0.35))
    # ITL: A 0.2, 0.2, 1.4; B 0.1 -> sorted 0.1 0.2 0.2 1.4
    check(s.itl, [0.1, 0.2, 0.2, 1.4], (0.2, 0.2 + 1.2 * 0.85, 0.2 + 1.2 * 0.97, 1.4, 0.475))
    # E2E of completed requests: A 2.8, B 1.6, C 2.0
    check(s.e2e, [2.8, 1.6, 2.0], (2.0, 2.0 + 0.8 * 0.9, 2.0 + 0.8 * 0.98, 2.8, 6.4 / 3))
    # queue: A 0.5, B 0.5, C 1.0
    check(s.queue_time, [0.5, 0.5, 1.0], (0.5, 0.5 + 0.5 * 0.9, 0.5 + 0.5 * 0.98, 1.0, 2 / 3))


def test_counts_and_throughput_by_hand():
    s = summarize(hand_trace())
    assert (s.num_requests, s.num_completed, s.num_aborted) == (4, 3, 1)
    assert (s.num_prompt_tokens, s.num_output_tokens) == (35, 7)
    assert s.duration == pytest.approx(3.0)  # first arrival 0.0 -> last finish 3.0
    assert s.request_throughput == pytest.approx(1.0)
    assert s.output_throughput == pytest.approx(7 / 3)
    assert s.total_throughput == pytest.approx(42 / 3)
    assert (s.num_steps, s.num_preemptions, s.max_num_waiting) == (3, 1, 2)
    assert s.max_kv_usage == 0.5
    assert s.mean_budget_utilisation == pytest.approx((10 / 16 + 13 / 16) / 2)  # step 2 has no budget


def test_generation_stalls_default_and_given_threshold():
    default = generation_stalls(hand_trace())  # 5 x median ITL (0.2) = 1.0 s
    assert default.threshold == pytest.approx(1.0)
    assert (default.count, default.total_time, default.worst_gap) == (1, pytest.approx(1.4), pytest.approx(1.4))
    assert default.per_request == {"A": [pytest.approx(1.4)]}
    given = generation_stalls(hand_trace(), 0.15)
    assert given.threshold == 0.15 and given.count == 3 and given.total_time == pytest.approx(1.8)
    assert list(given.per_request) == ["A"]
    empty = generation_stalls(EngineTrace())
    assert empty.threshold == math.inf and empty.count == 0 and empty.worst_gap == 0.0
    assert STALL_FACTOR == 5.0 and default.threshold == pytest.approx(STALL_FACTOR * 0.2)  # the glossary's stall


def test_step_series_by_hand():
    sr = step_series(hand_trace())
    assert sr.time == [1.0, 2.0, 3.0]
    assert (sr.num_running, sr.num_waiting, sr.kv_usage) == ([1, 2, 0], [1, 2, 0], [0.25, 0.5, 0.125])
    assert sr.scheduled_tokens == [10, 13, 7]
    assert sr.budget_utilisation[:2] == [10 / 16, 13 / 16] and math.isnan(sr.budget_utilisation[2])
    assert (sr.num_preemptions, sr.prefix_hit_tokens) == ([0, 0, 1], [0, 8, 0])


def test_prefix_cache_queries_count_a_resumed_request_with_its_outputs():
    t = EngineTrace()
    t.requests = {"R": RequestRecord("R", 0.0, 32, 0.0, [1.0, 2.0, 3.0], 3.0, "length", num_preemptions=1)}
    t.steps = [
        step(0, 0.0, 1.0, prefill={"R": 16}, new=["R"], hits={"R": 16}),
        step(1, 1.0, 2.0, decode={"R": 1}, preempted=["R"]),
        step(2, 2.5, 3.0, prefill={"R": 2}, new=["R"], hits={"R": 32}),  # resumed: 32 prompt + 2 outputs
    ]
    assert prefix_cache_tokens(t) == (32 + 34, 48)
    s = summarize(t)
    assert (s.prefix_cache_queries, s.prefix_cache_hits) == (66, 48)
    assert s.prefix_cache_hit_rate == pytest.approx(48 / 66)


def test_to_dict_is_flat_and_table_is_readable():
    s = summarize(hand_trace(), stall_threshold=0.15)
    d = s.to_dict()
    for name in ("ttft", "tpot", "itl", "e2e", "queue_time"):
        for stat in ("p50", "p95", "p99", "max", "mean"):
            assert isinstance(d[f"{name}_{stat}"], float)
    assert d["ttft_p50"] == pytest.approx(1.5) and d["itl_p99"] == pytest.approx(1.364)
    assert d["tpot_p50"] == pytest.approx(0.35) and d["e2e_p99"] == pytest.approx(2.784)
    assert d["output_throughput"] == pytest.approx(7 / 3)
    assert (d["num_preemptions"], d["num_stalls"], d["stall_threshold"]) == (1, 3, 0.15)
    assert d["stall_time"] == pytest.approx(1.8) and d["worst_stall"] == pytest.approx(1.4)
    assert all(isinstance(v, (int, float)) for v in d.values())
    table = s.table()
    assert "TTFT" in table and "1500.00" in table and "1 aborted" in table and "3 gaps > 150.0 ms" in table


def test_empty_trace_gives_nan_not_errors():
    s = summarize(EngineTrace())
    assert s.num_requests == 0 and math.isnan(s.ttft.p50) and math.isnan(s.request_throughput)
    assert "requests" in s.table()


def test_a_real_engine_run_is_consistent():
    """A seeded workload through the engine (fake model, virtual clock): the summary adds up."""
    from minivllm.config import EngineConfig
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.lab.sim.clock import VirtualClock
    from minivllm.lab.sim.run import run_workload
    from minivllm.lab.sim.workload import make_workload
    from minivllm.worker.fake_runner import FakeModelRunner

    config = EngineConfig.from_kwargs(
        model="fake", device="cpu", max_num_batched_tokens=64, max_num_seqs=4, max_model_len=512, num_gpu_blocks=64
    )
    engine = LLMEngine(config, model_runner=FakeModelRunner(vocab_size=1000), clock=VirtualClock())
    w = make_workload("rag_burst", 6, rate=50.0, seed=0, vocab_size=1000, max_model_len=512, long_prompt_len=(200, 300))
    run_workload(
        engine, w.requests, on_step=lambda e: e.clock.advance(0.01 + 1e-4 * e.trace.steps[-1].num_scheduled_tokens)
    )
    s = summarize(engine.trace)
    assert s.num_completed == 6 and s.num_output_tokens == sum(r.output_len for r in w.requests)
    assert s.num_prompt_tokens == sum(r.prompt_len for r in w.requests)
    assert s.ttft.count == 6 and s.itl.count == s.num_output_tokens - 6
    assert 0 < s.mean_budget_utilisation <= 1 and s.ttft.max > s.ttft.p50 > 0
