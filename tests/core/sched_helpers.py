"""Helpers shared by the core tests: build a scheduler, run it with the fake runner."""

from __future__ import annotations

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def make_scheduler(
    *,
    max_num_batched_tokens: int = 64,
    max_num_seqs: int = 16,
    max_model_len: int = 512,
    long_prefill_token_threshold: int = 0,
    enable_chunked_prefill: bool = True,
    policy: str = "fcfs",
    block_size: int = 16,
    num_gpu_blocks: int = 100,
    enable_prefix_caching: bool = False,
) -> Scheduler:
    return Scheduler(
        SchedulerConfig(
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            long_prefill_token_threshold=long_prefill_token_threshold,
            enable_chunked_prefill=enable_chunked_prefill,
            policy=policy,
        ),
        CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks, enable_prefix_caching=enable_prefix_caching),
    )


def make_request(req_id: str, prompt, max_tokens: int = 4, **kwargs) -> Request:
    prompt = list(range(prompt)) if isinstance(prompt, int) else list(prompt)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=kwargs.pop("ignore_eos", True))
    return Request(req_id, prompt, params, **kwargs)


def step(scheduler: Scheduler, runner: FakeModelRunner):
    """One engine step; returns (SchedulerOutput, EngineCoreOutputs)."""
    out = scheduler.schedule()
    return out, scheduler.update_from_output(out, runner.execute_model(out))


def run_table(scheduler: Scheduler, runner: FakeModelRunner | None = None, max_steps: int = 1000):
    """Run to completion; the step table is a list of {req_id: num_scheduled_tokens}."""
    runner = runner or FakeModelRunner()
    table = []
    while scheduler.has_unfinished_requests() and len(table) < max_steps:
        out, _ = step(scheduler, runner)
        table.append(dict(out.num_scheduled_tokens))
    return table
