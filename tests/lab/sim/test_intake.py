"""The API server's serial intake in front of the engine (minivllm.lab.sim.intake, issue 19)."""

from __future__ import annotations

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.intake import intake_times
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.lab.sim.workload import WorkloadRequest
from minivllm.sampling_params import SamplingParams


def test_a_burst_reaches_the_engine_together_when_the_intake_drains():
    assert intake_times([0.0] * 4, 0.5) == [2.0] * 4


def test_spaced_requests_each_wait_one_intake():
    assert intake_times([0.0, 1.0, 3.0], 0.25) == [0.25, 1.25, 3.25]


def test_requests_arriving_while_the_intake_is_busy_join_its_busy_period():
    # 0 and 0.1 overlap (busy until 0.2 after the first, 0.4 after the second); 0.3 joins too; 5.0 starts anew
    assert intake_times([0.0, 0.1, 0.3, 5.0], 0.2) == pytest.approx([0.6, 0.6, 0.6, 5.2])
    assert intake_times([], 0.1) == [] and intake_times([1.0, 2.0], 0.0) == [1.0, 2.0]


def test_bad_input_is_refused_with_the_parameter_named():
    with pytest.raises(ValueError, match="intake_per_request_s must be >= 0"):
        intake_times([0.0], -1.0)
    with pytest.raises(ValueError, match="sorted ascending"):
        intake_times([1.0, 0.0], 0.1)


def test_the_engine_schedules_after_the_intake_and_counts_latency_from_arrival():
    model = CostModel(name="flat", overhead_s=0.01, kv_bytes_per_token=100, kv_cache_bytes=10**7, vocab_size=500)
    model.intake_per_request_s = 0.05
    config = EngineConfig.from_kwargs(model="none", max_num_batched_tokens=256, max_num_seqs=8, max_model_len=256)
    engine = LLMEngine(config, model_runner=SimRunner(model, vocab_size=500, config=config))
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    requests = [WorkloadRequest(f"r{i}", 0.0, [5 + i] * 10, params) for i in range(4)]
    run_workload(engine, requests, intake=model.intake())
    for rec in engine.trace.requests.values():
        assert rec.arrival_time == 0.0 and rec.first_scheduled_time == pytest.approx(0.2)  # 4 x 50 ms
        assert rec.ttft == pytest.approx(0.2 + 0.01)  # intake + one prefill step
    assert CostModel().intake() is None  # no intake: requests reach the engine when they arrive
