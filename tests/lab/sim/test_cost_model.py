"""Cost model (§11.7): step_time's shape, calibrate() on synthetic steps, presets, shapes from a trace."""

from __future__ import annotations

import numpy as np
import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.clock import VirtualClock
from minivllm.lab.sim.cost_model import (
    COEFFICIENTS,
    TERMS,
    CostModel,
    StepSample,
    list_presets,
    shapes_from_steps,
    step_shape,
)
from minivllm.lab.sim.fit import calibrate
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner

TRUE = CostModel(
    overhead_s=0.02,
    per_token_s=3e-4,
    ridge_tokens=16,
    per_request_s=1e-3,
    attn_pair_s=2e-8,
    kv_read_s_per_byte=5e-11,
    kv_bytes_per_token=46080,
)


def synthetic_shapes(n: int, seed: int = 0) -> list[list[tuple[int, int]]]:
    """Decode batches, prefill chunks and mixed steps with random sizes and contexts."""
    rng = np.random.default_rng(seed)
    shapes = []
    for i in range(n):
        decodes = [(1, int(k)) for k in rng.integers(1, 2000, rng.integers(0, 24))]
        chunks = [(int(q), int(k)) for q, k in zip(rng.integers(2, 1024, i % 3), rng.integers(0, 3000, i % 3))]
        shapes.append(decodes + chunks or [(1, 5)])
    return shapes


def test_calibrate_recovers_known_coefficients_exactly_without_noise():
    samples = [StepSample(s, TRUE.step_time(s)) for s in synthetic_shapes(300)]
    samples.append(StepSample([(16, 0)], TRUE.step_time([(16, 0)])))  # the ridge is one of the seen token counts
    fitted, report = calibrate(samples, CostModel(kv_bytes_per_token=46080))
    assert fitted.ridge_tokens == TRUE.ridge_tokens
    for name in COEFFICIENTS:
        assert getattr(fitted, name) == pytest.approx(getattr(TRUE, name), rel=1e-6), name
    assert report.median_ape < 1e-6 and report.p90_ape < 1e-6 and report.num_test == round(0.3 * len(samples))


def test_calibrate_with_noise_stays_close_and_reports_the_error():
    rng = np.random.default_rng(1)
    samples = [StepSample(s, TRUE.step_time(s) * rng.normal(1.0, 0.03)) for s in synthetic_shapes(600, seed=2)]
    fitted, report = calibrate(samples, CostModel(kv_bytes_per_token=46080))
    for name in ("overhead_s", "per_token_s", "attn_pair_s", "kv_read_s_per_byte"):
        assert getattr(fitted, name) == pytest.approx(getattr(TRUE, name), rel=0.2), name
    assert 1.0 < report.median_ape < 4.0 and report.p90_ape < 8.0


def test_calibrate_can_hold_coefficients_fixed_and_rejects_bad_input():
    samples = [StepSample(s, TRUE.step_time(s)) for s in synthetic_shapes(50)]
    fitted, _ = calibrate(samples, TRUE, fit=("overhead_s",), holdout=0.0)
    assert fitted.overhead_s == pytest.approx(TRUE.overhead_s) and fitted.attn_pair_s == TRUE.attn_pair_s
    with pytest.raises(ValueError, match=r"cannot fit \[.bogus.\]; allowed"):
        calibrate(samples, fit=("bogus",))
    with pytest.raises(ValueError, match="at least 7 non-empty steps, got 2"):
        calibrate(samples[:2])


@pytest.mark.parametrize("name", ["llama2_7b_a100", "cpu_smollm2"])
def test_step_time_is_monotone_in_tokens_requests_and_context(name):
    m = CostModel.from_preset(name)
    assert m.step_time([]) == 0.0
    times = [m.step_time([(q, 100)]) for q in range(1, 2048, 7)]
    assert all(b >= a for a, b in zip(times, times[1:])) and times[-1] > times[0]
    batch = [m.step_time([(1, 512)] * n) for n in range(1, 64)]
    assert all(b > a for a, b in zip(batch, batch[1:]))
    ctx = [m.step_time([(256, k)]) for k in range(0, 4096, 256)]
    assert all(b > a for a, b in zip(ctx, ctx[1:]))


def test_presets_load_with_their_sources_and_unknown_names_list_them():
    assert {"cpu_smollm2", "llama2_7b_a100", "llama2_7b_h100"} <= set(list_presets())
    for name in list_presets():
        m = CostModel.from_preset(name)
        assert m.name == name and m.meta and m.num_blocks(16) > 100
    cpu = CostModel.from_preset("cpu_smollm2")
    assert cpu.meta["calibration"]["median_ape"] <= 10.0 and cpu.meta["date"] and cpu.meta["machine"]
    with pytest.raises(ValueError, match="unknown cost-model preset 'nope'; available: cpu_smollm2, llama2_7b_a100"):
        CostModel.from_preset("nope")
    with pytest.raises(ValueError, match="unknown cost-model fields"):
        CostModel.from_dict({"name": "x", "flops": 1})


@pytest.mark.parametrize("name", ["llama2_7b_a100", "cpu_smollm2", "llama3_8b_h100"])
def test_the_terms_sum_to_the_step_time(name):
    m = CostModel.from_preset(name)
    rng = np.random.default_rng(0)
    for _ in range(200):
        shape = [(int(rng.integers(1, 600)), int(rng.integers(0, 3000))) for _ in range(int(rng.integers(1, 9)))]
        terms = m.terms(shape)
        assert set(terms) == set(TERMS) and min(terms.values()) >= 0
        assert sum(terms.values()) == pytest.approx(m.step_time(shape), rel=1e-12)
    assert m.terms([]) == dict.fromkeys(TERMS, 0.0)


def test_a_linear_profile_is_read_at_the_next_profiled_count_and_extended_by_its_last_slope():
    m = CostModel(linear_profile=[[1, 1.0], [64, 2.0], [120, 3.9], [128, 4.0]], overhead_s=0.5)
    assert [m.profiled_linear(t) for t in (1, 2, 64, 65, 128)] == [1.0, 2.0, 2.0, 3.9, 4.0]
    # beyond the table: the slope over its upper half (64 -> 128), not the last, noisy, pair's
    assert m.profiled_linear(192) == pytest.approx(4.0 + 2.0 / 64 * 64)
    assert m.step_time([(65, 0)]) == pytest.approx(4.4) and CostModel().profiled_linear(10) == 0.0
    gap = CostModel(linear_profile=[[8, 1.0], [16, 1.5], [1016, 10.0], [1024, 10.1]])  # counts 17..1015 missing
    assert gap.profiled_linear(12) == 1.5 and gap.profiled_linear(516) == pytest.approx(1.5 + 8.5 / 2)


def test_shapes_rebuilt_from_the_trace_equal_the_scheduler_outputs():
    """With preemption and prefix hits, the trace-only reconstruction matches num_computed_tokens."""
    recorded = []

    class Recording(FakeModelRunner):
        def execute_model(self, out):
            recorded.append(sorted(step_shape(out)))
            return super().execute_model(out)

    config = EngineConfig.from_kwargs(
        max_num_batched_tokens=48, max_num_seqs=6, num_gpu_blocks=14, block_size=8, max_model_len=104
    )
    engine = LLMEngine(config, model_runner=Recording(vocab_size=500), clock=VirtualClock())
    prefix = list(range(10, 42))
    for i in range(6):
        prompt = prefix + [100 + i] * (5 + 7 * i)
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=12 + 3 * i, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    steps = engine.trace.steps
    assert sum(len(s.preempted) for s in steps) > 0 and sum(sum(s.prefix_cache_hit_tokens.values()) for s in steps)
    assert [sorted(s) for s in shapes_from_steps(steps)] == recorded
