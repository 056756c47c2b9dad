"""Exercise checks for chapter 5 (block pool and prefix caching)."""

from __future__ import annotations

from collections.abc import Callable

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases, last_token_rule_hint
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def _scheduler(num_gpu_blocks: int, block_size: int) -> Scheduler:
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=16, max_model_len=1024),
        CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks, enable_prefix_caching=True),
    )


def engine_hit_tokens(prompt_len: int, shared_len: int, block_size: int) -> int:
    """What the engine does: request A (``prompt_len`` tokens) runs and finishes; then B, which shares
    A's first ``shared_len`` tokens and differs after them, is admitted. How many of B's tokens hit?"""
    s = _scheduler(200, block_size)
    a = [3 + i for i in range(prompt_len)]
    b = a[:shared_len] + [5000 + i for i in range(prompt_len - shared_len)]
    s.add_request(Request("A", a, SamplingParams(max_tokens=1)))
    list(run_steps(s))  # A runs to the end
    s.add_request(Request("B", b, SamplingParams(max_tokens=1)))
    out = s.schedule()
    return out.scheduled_new_reqs[0].num_computed_tokens


def check_exercise_1(student: Callable[[int, int, int], int]) -> None:
    cases = [(100, 40, 16), (64, 64, 16), (65, 64, 16), (113, 100, 16), (10, 10, 16), (32, 20, 8), (48, 48, 16)]
    check_cases("Exercise 1", student, [(args, engine_hit_tokens(*args)) for args in cases], hint=_hint_1)


def _hint_1(args: tuple, expected: int, got: object) -> str | None:
    prompt_len, shared_len, block_size = args
    return last_token_rule_hint(got, shared_len // block_size * block_size, expected)  # full shared blocks


def engine_free_queue(num_gpu_blocks: int, prompts: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """Admit every prompt in one step (max_tokens=1, so all finish in that step and are freed in batch
    order); return the block tables they had and the free queue afterwards, head (evicted next) first."""
    s, runner = _scheduler(num_gpu_blocks, 16), FakeModelRunner()
    for i, p in enumerate(prompts):
        s.add_request(Request(f"r{i}", p, SamplingParams(max_tokens=1)))
    out = s.schedule()
    tables = [s.kv_cache_manager.get_block_ids(r) for r in out.req_ids]
    s.update_from_output(out, runner.execute_model(out))
    pool = s.kv_cache_manager.block_pool
    return tables, [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


def free_queue_scenarios() -> list[tuple[int, list[list[int]]]]:
    common = list(range(100, 148))  # 48 tokens = 3 full blocks
    shared = list(range(200, 232))  # 32 tokens
    return [
        (11, [common + list(range(300, 307)), common + list(range(400, 405))]),  # vLLM's test_prefill
        (20, [shared + list(range(500, 508)), shared + list(range(600, 618)), shared + list(range(700, 738))]),
        (12, [list(range(800, 840)), list(range(900, 925))]),  # nothing shared
        (12, [list(range(1000, 1040)), list(range(1000, 1040))]),  # the same prompt twice
    ]


def check_exercise_2(student: Callable[[int, list[list[int]]], list[int]]) -> None:
    cases = []
    for num_blocks, prompts in free_queue_scenarios():
        tables, queue = engine_free_queue(num_blocks, prompts)
        cases.append(((num_blocks, tables), queue))
    check_cases("Exercise 2", student, cases)
