"""The runner contract (minivllm/worker/base.py): every runner the engine takes satisfies ModelRunnerBase.

mypy checks this file (pyproject.toml [tool.mypy] files): ``conforming`` only accepts a ModelRunnerBase,
so a runner that lacks a member, or has one of the wrong type, fails the type check. The tests check the
same at run time, and that each runner's per-request state follows SchedulerOutput only.
"""

from __future__ import annotations

import typing

from minivllm.config import EngineConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.base import ModelRunnerBase
from minivllm.worker.fake_runner import FakeModelRunner
from minivllm.worker.model_runner import ModelRunner

MEMBERS = [name for name in vars(ModelRunnerBase) if not name.startswith("_") and name not in typing.Protocol.__dict__]


R = typing.TypeVar("R", bound=ModelRunnerBase)


def conforming(runner: R) -> R:
    """Statically: the argument must satisfy the protocol. At run time: it has every member."""
    missing = [name for name in MEMBERS if not hasattr(runner, name)]
    assert not missing, f"{type(runner).__name__} lacks {missing}"
    return runner


def test_the_contract_names_what_the_engine_uses():
    engine_reads = ["clock", "tokenizer", "eos_token_id", "vocab_size", "max_position_embeddings"]
    engine_calls = ["determine_num_blocks", "initialize_kv_cache", "execute_model", "roll_back"]
    assert sorted(MEMBERS) == sorted(engine_reads + engine_calls)


def test_the_fake_and_the_simulated_runner_conform():
    conforming(FakeModelRunner())
    config = EngineConfig.from_kwargs(model="none", num_gpu_blocks=16)
    sim = conforming(SimRunner(CostModel.from_preset("llama2_7b_a100"), config=config))
    assert sim.clock.virtual and sim.determine_num_blocks() == 16


def test_the_model_runner_conforms_and_follows_the_scheduler_output(tiny):
    config = EngineConfig.from_kwargs(
        model=tiny.hf_folder,
        device="cpu",
        num_gpu_blocks=32,
        max_model_len=128,
        max_num_batched_tokens=8,
        max_num_seqs=4,
    )
    runner = conforming(ModelRunner(config, tiny))
    runner.initialize_kv_cache(32)
    scheduler = Scheduler(config.scheduler_config, config.cache_config)
    scheduler.add_request(Request("r", list(range(3, 23)), SamplingParams(max_tokens=3, temperature=0.0)))
    steps = 0
    while scheduler.has_unfinished_requests():
        out = scheduler.schedule()
        result = runner.execute_model(out)
        # The runner's num_computed_tokens is the scheduler's, where this step's chunk starts; the runner
        # never advances its own copy.
        assert runner.requests["r"].num_computed_tokens == out.num_computed_tokens["r"]
        scheduler.update_from_output(out, result)
        steps += 1
    assert steps == 3 + 2  # 20 prompt tokens in chunks of 8, then 2 decodes: 3 tokens in all
