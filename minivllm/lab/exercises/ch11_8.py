"""Exercise checks for §11.8 (chunked prefill combined with prefix caching, drafts and priorities).

Every expected answer is what the real Scheduler does (FakeModelRunner for the tokens), never a
formula: a student's function is compared with the engine on a few cases.
"""

from __future__ import annotations

from collections.abc import Callable

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases, last_token_rule_hint
from minivllm.lab.testbench import run_steps, step
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def tokens_billed(prompt_len: int, shared_len: int, block_size: int) -> int:
    """What the engine does: a first request (the shared prefix + one more token) has run to the end;
    a second request of ``prompt_len`` tokens, whose first ``shared_len`` tokens are the same prefix,
    arrives. How many tokens of the step's budget does its admission cost?"""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=4096, max_num_seqs=2, max_model_len=4096),
        CacheConfig(block_size=block_size, num_gpu_blocks=1000, enable_prefix_caching=True),
    )
    runner = FakeModelRunner()
    shared = list(range(100, 100 + shared_len))
    s.add_request(Request("first", shared + [1], SamplingParams(max_tokens=1, ignore_eos=True)))
    list(run_steps(s, runner))  # the first request runs to the end
    tail = list(range(20000, 20000 + prompt_len - shared_len))
    s.add_request(Request("second", shared + tail, SamplingParams(max_tokens=1, ignore_eos=True)))
    out, _ = step(s, runner)
    return out.num_scheduled_tokens.get("second", 0)


def check_exercise_1(student: Callable[[int, int, int], int]) -> None:
    cases = [(100, 70, 16), (84, 71, 16), (64, 64, 16), (65, 64, 16), (40, 10, 16), (300, 256, 32)]
    check_cases("Exercise 1", student, [(c, tokens_billed(*c)) for c in cases], hint=_hint_1)


def _hint_1(args: tuple, expected: int, got: object) -> str | None:
    prompt_len, shared_len, block_size = args
    return last_token_rule_hint(got, prompt_len - shared_len // block_size * block_size, expected)


def chunk_beside_drafts(budget: int, num_decodes: int, num_drafts: int) -> int:
    """What the engine does: ``num_decodes`` requests decode, each carrying ``num_drafts`` draft
    tokens; a long prompt arrives. How many of its prompt tokens fit into that step?"""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=num_decodes + 1, max_model_len=4096),
        CacheConfig(block_size=16, num_gpu_blocks=600, enable_prefix_caching=False),
    )
    runner = FakeModelRunner(num_spec_tokens=num_drafts)  # proposes num_drafts drafts after every sample
    for i in range(num_decodes):
        s.add_request(Request(f"chat{i}", list(range(10 * i + 3, 10 * i + 7)), SamplingParams(max_tokens=200)))
    step(s, runner)  # the chats' 4-token prompts: each samples a token and gets its drafts
    s.add_request(Request("long", list(range(5000, 8000)), SamplingParams(max_tokens=1)))
    out, _ = step(s, runner)
    return out.num_scheduled_tokens.get("long", 0)


def check_exercise_2(student: Callable[[int, int, int], int]) -> None:
    cases = [(64, 2, 4), (32, 3, 2), (128, 0, 4), (48, 4, 3), (16, 3, 4), (20, 4, 4)]
    check_cases("Exercise 2", student, [(c, chunk_beside_drafts(*c)) for c in cases])


def priority_victim(running: list[tuple[str, int, float]]) -> str:
    """What the engine does under ``policy="priority"``: the requests ``(request_id, priority,
    arrival_time)`` all run, the pool is full, and the first one in line needs a new block. Who is
    preempted?"""
    order = sorted(running, key=lambda r: (r[1], r[2]))  # the order the priority queue admits them in
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=1024, max_num_seqs=len(running), max_model_len=256, policy="priority"),
        CacheConfig(block_size=16, num_gpu_blocks=len(running) + 1, enable_prefix_caching=False),
    )
    runner = FakeModelRunner()
    for i, (req_id, priority, arrival) in enumerate(running):
        length = 16 if req_id == order[0][0] else 8  # only the first in line will need a second block
        s.add_request(
            Request(
                req_id,
                list(range(100 * i + 3, 100 * i + 3 + length)),
                SamplingParams(max_tokens=50),
                arrival_time=arrival,
                priority=priority,
            )
        )
    step(s, runner)  # everyone is admitted and fills one block: the pool is full
    out, _ = step(s, runner)
    preempted = sorted(out.preempted_req_ids)
    return preempted[0] if preempted else ""


def check_exercise_3(student: Callable[[list[tuple[str, int, float]]], str]) -> None:
    cases = [
        [("a", 0, 0.0), ("b", 1, 0.1), ("c", 0, 0.2)],
        [("a", 2, 0.0), ("b", 2, 0.5), ("c", 1, 0.3)],
        [("x", 5, 1.0), ("y", 0, 2.0), ("z", 3, 0.0), ("w", 5, 0.5)],
        [("p", 0, 0.0), ("q", 0, 1.0)],
    ]
    check_cases("Exercise 3", student, [((c,), priority_victim(c)) for c in cases])
