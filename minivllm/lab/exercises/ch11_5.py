"""Exercise checks for §11.5 (preemption and recovery)."""

from __future__ import annotations

from collections.abc import Callable

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.testbench import run_steps, step
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def _scheduler(num_gpu_blocks: int, block_size: int, budget: int = 256) -> Scheduler:
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=8, max_model_len=512),
        CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks),  # prefix caching on (V1 default)
    )


def _request(i: int, prompt_len: int, max_tokens: int) -> Request:
    return Request(
        f"r{i}",
        list(range(1000 * (i + 1), 1000 * (i + 1) + prompt_len)),
        SamplingParams(max_tokens=max_tokens, ignore_eos=True),
    )


def first_preemption(prompt_lens: list[int], max_tokens: list[int], num_gpu_blocks: int) -> tuple[int, str] | None:
    """What the Scheduler does: (step counted from 0, victim id) of the first preemption, or None.
    Requests r0, r1, ... all arrive at step 0; block size 16, budget 256, max_num_seqs 8."""
    s = _scheduler(num_gpu_blocks, 16)
    for i, (p, m) in enumerate(zip(prompt_lens, max_tokens)):
        s.add_request(_request(i, p, m))
    for i, (out, _) in enumerate(run_steps(s)):
        if out.preempted_req_ids:
            return i, sorted(out.preempted_req_ids)[0]
    return None


def resume_split(prompt_len: int, steps_before: int, block_size: int) -> tuple[int, int]:
    """What the engine does: a lone request runs ``steps_before`` steps, is preempted, and is resumed in the
    next step. Returns (tokens found in the prefix cache, tokens computed in the resume step)."""
    s = _scheduler(64, block_size, budget=512)
    request = _request(0, prompt_len, 100)
    s.add_request(request)
    runner = FakeModelRunner()
    for _ in range(steps_before):
        step(s, runner)
    s.preempt_request(request.request_id)
    out = s.schedule()
    (resumed,) = [r for r in out.scheduled_cached_reqs if r.resumed_from_preemption]
    return resumed.num_computed_tokens, out.num_scheduled_tokens[request.request_id]


def check_exercise_1(student: Callable[[list[int], list[int], int], tuple[int, str] | None]) -> None:
    scenes = [
        ([20, 20, 20], [40, 40, 40], 10),
        ([30, 20, 20], [40, 40, 40], 10),
        ([20, 30, 40, 50], [30, 30, 30, 30], 14),
        ([64, 10, 10], [20, 60, 60], 8),
        ([10, 10, 40], [60, 60, 10], 9),  # r2 finishes early; later r0 needs a block
        ([20, 20], [20, 20], 12),  # enough blocks for both: no preemption
    ]
    check_cases("Exercise 1", student, [((p, m, n), first_preemption(p, m, n)) for p, m, n in scenes])


def check_exercise_2(student: Callable[[int, int, int], tuple[int, int]]) -> None:
    cases = [(40, 1, 16), (40, 5, 16), (47, 2, 16), (48, 1, 16), (16, 1, 16), (100, 3, 8), (30, 12, 32)]
    check_cases("Exercise 2", student, [((p, k, b), resume_split(p, k, b)) for p, k, b in cases])
