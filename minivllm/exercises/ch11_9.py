"""Exercise checks for §11.9-§11.10 (evaluating like production, five misconceptions).

Each check recomputes the expected answers with the engine (the simulator's trace, the real
Scheduler with FakeModelRunner) and compares the student's function with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.core.testing import run_steps, step
from minivllm.exercises.common import check_cases
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check_exercise_1(student: Callable[[float, list[float]], tuple[float, float | None]]) -> None:
    """TTFT and TPOT of every request of a simulated run, against the trace (metrics.summarize's definitions)."""
    from minivllm.sim.run import simulate
    from minivllm.sim.workload import make_workload

    w = make_workload("azure_code", 24, rate=4.0, seed=3, vocab_size=32000, max_model_len=4096)
    trace = simulate(w.requests, max_num_batched_tokens=512, max_num_seqs=16, max_model_len=4096).trace
    for rec in trace.requests.values():
        tpot = None
        if rec.num_output_tokens > 1:
            tpot = (rec.token_times[-1] - rec.token_times[0]) / (rec.num_output_tokens - 1)
        args = (rec.arrival_time, list(rec.token_times))
        try:
            got = student(*args)
            ttft_got, tpot_got = got
        except Exception as e:  # an unfinished answer: say so, keep the notebook running
            print(f"Exercise 1: not yet — {type(e).__name__}: {e}")
            return
        if not (_same(ttft_got, rec.ttft) and _same(tpot_got, tpot)):
            print(
                f"Exercise 1: not yet — request {rec.request_id} (arrival {rec.arrival_time:.4f} s, "
                f"{rec.num_output_tokens} tokens): expected ({rec.ttft!r}, {tpot!r}), got {got!r}"
            )
            return
    print("Exercise 1: correct!")


def kv_tokens_read(prompt_len: int, chunk: int) -> int:
    """What the engine does: a lone prompt prefilled in chunks of ``chunk`` tokens. Sum over its steps of
    the tokens already in the KV cache that attention reads (the context of each chunk)."""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=chunk, max_num_seqs=1, max_model_len=8192),
        CacheConfig(block_size=16, num_gpu_blocks=600, enable_prefix_caching=False),
    )
    s.add_request(Request("doc", list(range(3, 3 + prompt_len)), SamplingParams(max_tokens=1, ignore_eos=True)))
    return sum(out.num_computed_tokens["doc"] for out, _ in run_steps(s))


def check_exercise_2(student: Callable[[int, int], int]) -> None:
    cases = [(2048, 512), (100, 32), (64, 64), (65, 64), (1000, 7), (4096, 128)]
    check_cases("Exercise 2", student, [(c, kv_tokens_read(*c)) for c in cases])


def preemption_case(prompt_len: int, budget: int, steps: int) -> tuple[int, int, int]:
    """Run a lone request ``steps`` steps, preempt it, step once more: (num_tokens, num_computed_tokens)
    when it was preempted, and the tokens the prefix cache gave back when it was readmitted."""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=2, max_model_len=1024),
        CacheConfig(block_size=16, num_gpu_blocks=200, enable_prefix_caching=True),
    )
    s.add_request(Request("r", list(range(3, 3 + prompt_len)), SamplingParams(max_tokens=100, ignore_eos=True)))
    runner = FakeModelRunner()
    for _ in range(steps):
        step(s, runner)
    request = s.requests["r"]
    before = (request.num_tokens, request.num_computed_tokens)
    s.preempt_request("r")
    out = s.schedule()  # readmitted at once: nothing was reused in between
    return (*before, out.scheduled_cached_reqs[0].num_computed_tokens)


def check_exercise_3(student: Callable[[int, int], int]) -> None:
    scenes = [(100, 32, 2), (100, 20, 3), (40, 64, 5), (47, 64, 2), (200, 64, 1), (30, 8, 2)]
    cases = []
    for scene in scenes:
        num_tokens, num_computed, back = preemption_case(*scene)
        cases.append(((num_tokens, num_computed, 16), back))
    check_cases("Exercise 3", student, cases)
