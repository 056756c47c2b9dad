"""SimRunner (§11.7): the engine's own decisions on a virtual clock priced by a cost model."""

from __future__ import annotations

import time

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.clock import VirtualClock
from minivllm.lab.sim.cost_model import CostModel, shapes_from_steps
from minivllm.lab.sim.fit import calibrate
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.lab.sim.workload import make_workload
from minivllm.worker.fake_runner import FakeModelRunner

A100 = CostModel.from_preset("llama2_7b_a100")


def sim_engine(cost_model: CostModel = A100, **kwargs) -> LLMEngine:
    config = EngineConfig.from_kwargs(**{"max_num_batched_tokens": 512, "max_num_seqs": 32, **kwargs})
    return LLMEngine(config, model_runner=SimRunner(cost_model, vocab_size=cost_model.vocab_size, config=config))


def step_table(engine: LLMEngine) -> list[tuple]:
    return [(s.num_scheduled_tokens, s.prefill_tokens, s.decode_tokens, s.preempted) for s in engine.trace.steps]


def test_same_workload_gives_identical_trace_numbers():
    def run():
        engine = sim_engine()
        run_workload(
            engine, make_workload("sharegpt", 40, rate=4.0, seed=3, vocab_size=32000, max_model_len=4096).requests
        )
        return [(s.start, s.end, s.num_scheduled_tokens) for s in engine.trace.steps], {
            r: (rec.arrival_time, tuple(rec.token_times)) for r, rec in engine.trace.requests.items()
        }

    first, second = run(), run()
    assert first == second and len(first[0]) > 50


@pytest.mark.parametrize("kwargs", [{}, {"num_gpu_blocks": 65, "block_size": 16}, {"enable_chunked_prefill": False}])
def test_fake_and_sim_runners_give_the_same_step_table(kwargs):
    """Offline (all at t=0) the schedule cannot depend on time: both runners see the same decisions."""
    requests = make_workload("uniform", 24, seed=1, vocab_size=32000, max_model_len=1024).requests
    config = dict(max_num_batched_tokens=1024, max_num_seqs=16, max_model_len=1024, **kwargs)
    sim = sim_engine(**config)
    run_workload(sim, requests)
    fake_config = EngineConfig.from_kwargs(**{**config, "num_gpu_blocks": sim.config.cache_config.num_gpu_blocks})
    fake = LLMEngine(fake_config, model_runner=FakeModelRunner(vocab_size=32000), clock=VirtualClock())
    run_workload(fake, requests)
    assert step_table(sim) == step_table(fake)
    assert any(s.preempted for s in sim.trace.steps) == ("num_gpu_blocks" in kwargs)  # the small cache preempts
    assert {r: o.outputs[0].token_ids for r, o in sim.outputs.items()} == {
        r: o.outputs[0].token_ids for r, o in fake.outputs.items()
    }
    assert all(s.duration == 0 for s in fake.trace.steps) and all(s.duration > 0 for s in sim.trace.steps)


def test_each_step_lasts_what_the_cost_model_says():
    engine = sim_engine(max_num_batched_tokens=256)
    run_workload(
        engine, make_workload("azure_conv", 12, rate=2.0, seed=0, vocab_size=32000, max_model_len=4096).requests
    )
    for step, shape in zip(engine.trace.steps, shapes_from_steps(engine.trace.steps)):
        assert step.duration == pytest.approx(A100.step_time(shape), rel=1e-12)
    assert engine.model_runner.busy_time == pytest.approx(sum(s.duration for s in engine.trace.steps))
    shares = engine.model_runner.term_shares()  # where the busy time went, by cost-model term
    assert sum(shares.values()) == pytest.approx(1.0) and shares["linear"] > 0.5 and min(shares.values()) > 0
    # calibrate() reads StepRecords directly and finds the (closed-form) model that priced them
    closed = CostModel(
        overhead_s=8e-3,
        per_token_s=6e-5,
        ridge_tokens=64,
        per_request_s=2e-5,
        attn_pair_s=7e-12,
        kv_read_s_per_byte=6e-13,
        kv_bytes_per_token=A100.kv_bytes_per_token,
        kv_cache_bytes=10**11,
    )
    engine = sim_engine(closed, max_num_batched_tokens=256)
    run_workload(
        engine, make_workload("azure_conv", 12, rate=2.0, seed=0, vocab_size=32000, max_model_len=4096).requests
    )
    fitted, report = calibrate(engine.trace.steps, CostModel(kv_bytes_per_token=A100.kv_bytes_per_token))
    assert report.median_ape < 0.1 and fitted.per_token_s == pytest.approx(closed.per_token_s, rel=0.05)


def test_virtual_time_jumps_to_the_next_arrival_when_idle(monkeypatch):
    requests = make_workload("uniform", 2, seed=0, vocab_size=32000, max_model_len=1024).requests
    requests[1].arrival_time = 1000.0  # long after the first request is done
    engine = sim_engine()
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)  # a wall clock would sleep through the idle gap
    run_workload(engine, requests)
    assert sleeps == [] and isinstance(engine.clock, VirtualClock)  # no real waiting
    first = engine.trace.requests[requests[0].request_id]
    second = engine.trace.requests[requests[1].request_id]
    assert first.finish_time < 1000.0 and second.first_scheduled_time == 1000.0
    assert engine.clock.now() == second.finish_time


def test_kv_capacity_comes_from_the_cost_model_unless_the_config_sets_it():
    # the preset's memory model: what vLLM's profiling run at this budget, max_num_seqs and utilisation leaves
    mem = A100.memory_model()
    assert mem is not None
    assert sim_engine().config.cache_config.num_gpu_blocks == mem.num_blocks(512, 32, 16)
    assert sim_engine(block_size=32).config.cache_config.num_gpu_blocks == A100.num_blocks(32, 512, 32)
    big, small = sim_engine(max_num_batched_tokens=16384), sim_engine(gpu_memory_utilization=0.5)
    assert big.config.cache_config.num_gpu_blocks < sim_engine().config.cache_config.num_gpu_blocks  # activations
    assert small.config.cache_config.num_gpu_blocks < sim_engine().config.cache_config.num_gpu_blocks / 2
    fixed = CostModel(name="fixed", per_token_s=1e-3, kv_bytes_per_token=1000, kv_cache_bytes=16_000_000)
    assert sim_engine(fixed, max_model_len=1024).config.cache_config.num_gpu_blocks == 1000  # no memory: the bytes
    assert sim_engine(num_gpu_blocks=77, max_model_len=1024).config.cache_config.num_gpu_blocks == 77
    with pytest.raises(ValueError, match="has no KV capacity"):
        sim_engine(CostModel(name="bare", per_token_s=1e-3))


def test_a_300_request_sharegpt_run_finishes_every_request_within_the_limits():
    """The simulator at the scale of the chapter's runs (a speed number belongs in a benchmark, not a test):
    every request ends with all its tokens, no step breaks a limit, the clock is virtual."""
    requests = make_workload("sharegpt", 300, rate=3.0, seed=0, vocab_size=32000, max_model_len=4096).requests
    engine = sim_engine(max_num_batched_tokens=2048, max_num_seqs=128)
    run_workload(engine, requests)
    assert {r: len(o.outputs[0].token_ids) for r, o in engine.outputs.items()} == {
        r.request_id: r.output_len for r in requests
    }
    assert all(o.finished for o in engine.outputs.values()) and not engine.scheduler.has_unfinished_requests()
    steps = engine.trace.steps
    assert all(0 < s.num_scheduled_tokens <= 2048 for s in steps) and len(steps) > len(requests)
    assert engine.clock.now() > max(r.arrival_time for r in requests)  # virtual seconds, far beyond the wall time
    assert engine.clock.now() == pytest.approx(steps[-1].end)


def test_repeating_runner_times_each_step_and_changes_nothing(tiny_qwen2):
    """The calibration wrapper re-runs each real step from the same state: same tokens as one plain run."""
    from minivllm.lab.sim.calibrate import RepeatingRunner
    from minivllm.model.loader import load_model
    from minivllm.sampling_params import SamplingParams
    from minivllm.worker.model_runner import ModelRunner

    loaded = load_model(tiny_qwen2)
    outputs = []
    for repeats in (1, 3):
        config = EngineConfig.from_kwargs(max_num_batched_tokens=16, max_num_seqs=4, max_model_len=128)
        runner = RepeatingRunner(ModelRunner(config, loaded), repeats)
        engine = LLMEngine(config, model_runner=runner)
        for i in range(3):
            params = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)
            engine.add_request(f"r{i}", list(range(5 + i, 30 + 3 * i)), params)
        while engine.has_unfinished_requests():
            engine.step()
        assert [len(t) for t in runner.times] == [repeats] * len(engine.trace.steps)
        outputs.append({r: o.outputs[0].token_ids for r, o in engine.outputs.items()})
    assert outputs[0] == outputs[1]
