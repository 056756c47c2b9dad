"""Sizing §11.1's stall scene (benchmarks/stall_scene.py): the fit, the choice from given costs, and the
measuring on a real (tiny, CPU) engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from minivllm.lab.benchmarks.stall_scene import (
    PrefillCost,
    choose_scene,
    fit_prefill_cost,
    measure_stall_scene,
    slowest_chunked_step,
)

DECODE = 0.005  # a 5 ms decode step


def timings(a: float, b: float, c: float = 0.0, lengths=(512, 2048, 8192)) -> list[tuple[int, float]]:
    return [(n, c + a * n + b * n * n) for n in lengths]


def assert_budget_rules(scene) -> None:
    budget, chats = scene.budget, scene.num_chats
    assert budget & (budget - 1) == 0 and budget >= scene.block_size and budget > chats
    assert budget <= scene.long_tokens or budget == max(scene.block_size, 2 ** math.ceil(math.log2(chats + 1)))
    expected = slowest_chunked_step(scene.decode_step, scene.cost, scene.long_tokens, budget - chats)
    assert scene.predicted_chunked_step == pytest.approx(expected)


def test_fit_recovers_the_cost_terms():
    cost = fit_prefill_cost(timings(5e-6, 2e-10))
    assert (cost.a, cost.b, cost.c) == pytest.approx((5e-6, 2e-10, 0.0), abs=1e-12)
    # A per-step part: negative on a GPU (a short prefill hides under the weights' read), positive on a CPU.
    for c in (-0.002, 0.003):
        cost = fit_prefill_cost(timings(5e-6, 2e-10, c))
        assert (cost.a, cost.b, cost.c) == pytest.approx((5e-6, 2e-10, c), rel=1e-6)
    # Noise that bends the curve down: no negative attention term, a straight line instead.
    points = [(512, 0.004), (2048, 0.013), (8192, 0.040)]
    cost = fit_prefill_cost(points)
    slope, intercept = np.polyfit([n for n, _ in points], [t for _, t in points], 1)
    assert cost.b == 0 and (cost.a, cost.c) == pytest.approx((slope, intercept))
    # Two points: the straight line through both; one: the line through the origin.
    line = fit_prefill_cost([(512, 0.003), (2048, 0.009)])
    assert (line.a, line.b, line.c) == pytest.approx((0.006 / 1536, 0.0, 0.001))
    line = fit_prefill_cost([(1000, 0.004)])
    assert (line.a, line.b, line.c) == pytest.approx((4e-6, 0.0, 0.0))
    cost = fit_prefill_cost([(512, -0.001), (2048, -0.002)])  # prefill lost in the noise
    assert cost.a == cost.b == 0 and cost(8192) == 0


def test_prefill_cost_of_a_chunk():
    cost = PrefillCost(a=1e-6, b=1e-10, c=-1e-3)
    assert cost(4096, 2048) == pytest.approx(-1e-3 + 1e-6 * 2048 + 1e-10 * (4096**2 - 2048**2))
    assert cost(100) == 0  # below zero counts as zero
    assert cost(int(round(cost.tokens_for(0.01)))) == pytest.approx(0.01, rel=1e-3)


def test_scene_reaching_ten_decode_steps():
    scene = choose_scene(DECODE, timings(5e-6, 2e-10), max_model_len=8192)
    stall = lambda n: DECODE + 5e-6 * n + 2e-10 * n * n  # noqa: E731
    assert scene.capped_by is None and scene.long_tokens % 16 == 0
    assert stall(scene.long_tokens) >= 10 * DECODE > stall(scene.long_tokens - 16)  # the shortest that does
    assert scene.long_tokens == 7040
    assert scene.predicted_stall == pytest.approx(stall(7040)) and scene.predicted_ratio >= 10
    assert_budget_rules(scene)
    # The largest power of two whose slowest chunk adds at most 2 decode steps of prefill.
    assert scene.predicted_chunked_step - DECODE <= 2 * DECODE
    doubled = slowest_chunked_step(DECODE, scene.cost, scene.long_tokens, 2 * scene.budget - 8)
    assert doubled - DECODE > 2 * DECODE
    assert scene.budget == 1024
    text = scene.explain()
    assert "7,040 tokens" in text and "1024 tokens" in text and "10.0x a decode step" in text
    assert "too small" not in text and "MINIVLLM_INSTRUCTOR_MODEL" not in text


def test_model_too_small_is_capped_by_max_model_len():
    scene = choose_scene(DECODE, timings(1e-7, 0.0), max_model_len=8192)  # 8k tokens prefill in under 1 ms
    assert scene.capped_by == "max_model_len"
    assert scene.long_tokens == 8192 - 8 == scene.max_prompt_tokens  # room for the long request's 8 tokens
    assert scene.predicted_ratio < 10
    assert_budget_rules(scene)
    assert scene.budget == 4096  # chunks are cheap: the largest power of two within the prompt
    text = scene.explain()
    assert "too small" in text and "MINIVLLM_INSTRUCTOR_MODEL" in text and "8,184 tokens" in text


def test_kv_cache_cap_is_named():
    scene = choose_scene(DECODE, timings(5e-6, 2e-10), max_model_len=8192, kv_room_tokens=3000)
    assert scene.capped_by == "kv cache" and scene.long_tokens == 3000 and scene.predicted_ratio < 10
    assert "KV cache" in scene.explain() and "too small" not in scene.explain()


def test_budget_floor_and_expensive_chunks():
    # Prefill far dearer than a decode step: the smallest budget (block size 16, above the 8 chats).
    scene = choose_scene(DECODE, timings(2e-3, 0.0), max_model_len=8192)
    assert scene.capped_by is None and scene.long_tokens == 32 and scene.budget == 16
    assert not scene.budget_fits and "Even the smallest budget" in scene.explain()
    # 16 chats need a budget above 16.
    scene = choose_scene(DECODE, timings(2e-3, 0.0), max_model_len=8192, num_chats=16)
    assert scene.budget == 32
    assert_budget_rules(scene)


def test_measured_on_a_tiny_cpu_engine(tiny):
    from minivllm import EngineConfig, LLMEngine
    from minivllm.worker.model_runner import ModelRunner

    built = []

    def make_engine(**settings):
        config = EngineConfig.from_kwargs(model=tiny.hf_folder, device="cpu", dtype="float32", **settings)
        built.append(config)
        return LLMEngine(config, model_runner=ModelRunner(config, tiny))

    scene = measure_stall_scene(
        make_engine, tiny.arch.vocab_size, 256, decode_steps=5, calibration_tokens=(32, 96, 400), repeats=1
    )
    assert len(built) == 1 and not built[0].scheduler_config.enable_chunked_prefill
    assert scene.decode_step > 0
    assert [n for n, _ in scene.prefill_timings] == [32, 96, 248]  # 400 is past max_model_len 256 less 8
    assert scene.cost == fit_prefill_cost(scene.prefill_timings)
    assert 16 <= scene.long_tokens <= 248 and scene.max_prompt_tokens == 248
    n = scene.long_tokens
    assert scene.predicted_stall == pytest.approx(scene.decode_step + scene.cost(n))
    assert scene.predicted_ratio == pytest.approx(scene.predicted_stall / scene.decode_step)
    assert (scene.capped_by is None) == (scene.predicted_ratio >= 10 * (1 - 1e-9))
    assert scene.capped_by in (None, "max_model_len")
    assert_budget_rules(scene)
    assert f"{scene.long_tokens:,} tokens" in scene.explain()
