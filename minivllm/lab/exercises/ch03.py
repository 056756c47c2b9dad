"""Exercise checks for chapter 3 (unified token scheduling)."""

from __future__ import annotations

from collections.abc import Callable

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams


def steps_until_first_token(prompt_len: int, budget: int, threshold: int = 0) -> int:
    """What the engine does: the step (1-based) at which a lone request gets its first token."""
    s = Scheduler(
        SchedulerConfig(
            max_num_batched_tokens=budget, max_num_seqs=1, max_model_len=4096, long_prefill_token_threshold=threshold
        ),
        CacheConfig(block_size=16, num_gpu_blocks=300, enable_prefix_caching=False),
    )
    s.add_request(Request("r", list(range(prompt_len)), SamplingParams(max_tokens=1, ignore_eos=True)))
    return len(list(run_steps(s)))


def check_exercise_1(student: Callable[[int, int], int]) -> None:
    cases = [((p, b), steps_until_first_token(p, b)) for p, b in [(100, 32), (64, 64), (65, 64), (1, 16), (2048, 512)]]
    check_cases("Exercise 1", student, cases)


def check_exercise_2(student: Callable[[int, int, int], int]) -> None:
    cases = [
        ((p, b, t), steps_until_first_token(p, b, t))
        for p, b, t in [(100, 64, 30), (100, 32, 64), (90, 512, 0), (1000, 256, 100)]
    ]
    check_cases("Exercise 2", student, cases)
