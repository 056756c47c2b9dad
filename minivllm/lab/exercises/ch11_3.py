"""Exercise checks for chapter 11.3-11.4 (the token budget, one scheduling path)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from minivllm.config import CacheConfig, EngineConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.testbench import run_steps
from minivllm.metrics.trace import EngineTrace
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def budget_schedule(prompt_lens: Sequence[int], budget: int) -> list[dict[int, int]]:
    """What the engine does: prompts of ``prompt_lens`` all arrive at once (one output token each); per step,
    how many tokens does each request (by index) get?"""
    scheduler = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=len(prompt_lens), max_model_len=4096),
        CacheConfig(block_size=16, num_gpu_blocks=1000, enable_prefix_caching=False),
    )
    for i, n in enumerate(prompt_lens):
        scheduler.add_request(Request(str(i), [100 + i] * n, SamplingParams(max_tokens=1, ignore_eos=True)))
    return [{int(r): n for r, n in out.num_scheduled_tokens.items()} for out, _ in run_steps(scheduler)]


def check_exercise_1(student: Callable[[Sequence[int], int], list[dict[int, int]]]) -> None:
    cases = [
        ((lens, b), budget_schedule(lens, b))
        for lens, b in [((100, 30), 64), ((10, 10, 10), 16), ((200,), 64), ((5, 300, 7), 128), ((64, 64), 64)]
    ]
    check_cases("Exercise 1", student, cases)


def run_scene(
    prompts: dict[str, int], max_tokens: int, budget: int, num_gpu_blocks: int, arrivals: dict[str, int] | None = None
) -> tuple[EngineTrace, dict[str, list[int]]]:
    """Run requests (id -> prompt length, added at their arrival step) on the real Scheduler with the fake
    runner. Returns the trace and, per request, its ``num_computed_tokens`` read after every step."""
    config = EngineConfig.from_kwargs(
        max_num_batched_tokens=budget,
        max_num_seqs=8,
        max_model_len=min(512, (num_gpu_blocks - 1) * 16),
        num_gpu_blocks=num_gpu_blocks,
        block_size=16,
        enable_prefix_caching=False,
    )
    engine = LLMEngine(config, model_runner=FakeModelRunner())
    arrivals = arrivals or {}
    requests: dict[str, Request] = {}
    computed: dict[str, list[int]] = {r: [] for r in prompts}
    step = 0
    while len(requests) < len(prompts) or engine.has_unfinished_requests():
        for req_id, n in prompts.items():
            if req_id not in requests and arrivals.get(req_id, 0) <= step:
                engine.add_request(
                    req_id, [200 + len(requests)] * n, SamplingParams(max_tokens=max_tokens, ignore_eos=True)
                )
                requests[req_id] = engine.scheduler.requests[req_id]
        engine.step()
        for req_id in prompts:
            computed[req_id].append(requests[req_id].num_computed_tokens if req_id in requests else 0)
        step += 1
    return engine.trace, computed


SCENES = (  # (prompts, max_tokens, budget, num_gpu_blocks, arrivals): plenty of KV, then too little (preemption)
    ({"chat0": 12, "chat1": 12, "chat2": 12, "doc": 200}, 8, 64, 64, {"doc": 2}),
    ({"a": 40, "b": 40, "c": 40}, 60, 64, 12, None),
)


def check_exercise_2(student: Callable[[EngineTrace, str], list[int]]) -> None:
    """Compare with the integers the engine really held, read after every step. A failing case is named by
    its request id and first differing step (a trace's repr would fill the screen)."""
    name = "Exercise 2"
    for prompts, max_tokens, budget, blocks, arrivals in SCENES:
        trace, computed = run_scene(prompts, max_tokens, budget, blocks, arrivals)
        for req_id, expected in computed.items():
            try:
                got = student(trace, req_id)
            except Exception as e:  # a half-written answer: say what went wrong, keep the notebook running
                print(f"{name}: not yet — {type(e).__name__}: {e}")
                return
            if not isinstance(got, list) or len(got) != len(expected):
                print(
                    f"{name}: not yet — for request {req_id!r} expected a list of {len(expected)} ints "
                    f"(one per step), got {got!r}"
                )
                return
            if got != expected:
                k = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
                print(f"{name}: not yet — request {req_id!r} after step {k}: expected {expected[k]}, got {got[k]}")
                return
    print(f"{name}: correct!")
