"""Exercise checks for §11.7 (choosing the chunk size)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from minivllm.config import CacheConfig, EngineConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.sim.run import run_workload
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def _scheduler(budget: int, threshold: int = 0) -> Scheduler:
    return Scheduler(
        SchedulerConfig(
            max_num_batched_tokens=budget, max_num_seqs=64, max_model_len=8192, long_prefill_token_threshold=threshold
        ),
        CacheConfig(block_size=16, num_gpu_blocks=2000),
    )


def steps_to_first_token(prompt_len: int, num_decodes: int, budget: int) -> int:
    """What the Scheduler does: ``num_decodes`` requests are decoding when a prompt of ``prompt_len`` tokens
    arrives; in which step (counting from 1, the step it arrives in) does the prompt get its first token?"""
    s, runner = _scheduler(budget), FakeModelRunner()
    for i in range(num_decodes):
        s.add_request(Request(f"chat{i}", [100 + i, 200 + i, 300 + i], SamplingParams(max_tokens=10_000)))
    for _ in run_steps(s, runner):
        if all(r.num_output_tokens > 0 for r in s.requests.values()):  # the chats' prompts; then they decode
            break
    s.add_request(Request("long", list(range(10_000, 10_000 + prompt_len)), SamplingParams(max_tokens=1)))
    steps = 0
    for _ in run_steps(s, runner):
        steps += 1
        if "long" not in s.requests:
            break
    return steps


def first_step_chunks(prompt_lens: list[int], budget: int, threshold: int) -> list[int]:
    """What the Scheduler does: prompts arriving together (in this order) into an idle engine; the tokens
    each gets in the first step."""
    s = _scheduler(budget, threshold)
    for i, p in enumerate(prompt_lens):
        s.add_request(Request(f"p{i}", list(range(10_000 * (i + 1), 10_000 * (i + 1) + p)), SamplingParams()))
    out = s.schedule()
    return [out.num_scheduled_tokens.get(f"p{i}", 0) for i in range(len(prompt_lens))]


@cache
def _metrics(budget: int) -> tuple[float, float]:
    """(output tokens/s, ITL p99 in ms) of the exercise workload on the simulator at this budget."""
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.lab.metrics.summary import summarize
    from minivllm.lab.sim.cost_model import CostModel
    from minivllm.lab.sim.sim_runner import SimRunner
    from minivllm.lab.sim.workload import make_workload

    w = make_workload("azure_conv", 40, seed=1, vocab_size=32000, max_model_len=4096)
    config = EngineConfig.from_kwargs(model="none", max_num_batched_tokens=budget, max_num_seqs=32, max_model_len=4096)
    engine = LLMEngine(config, model_runner=SimRunner(CostModel.from_preset("llama2_7b_a100"), config=config))
    run_workload(engine, w.requests)
    m = summarize(engine.trace)
    return m.output_throughput, m.itl.p99 * 1e3


def best_budget(budgets: list[int], itl_p99_slo_ms: float) -> int | None:
    """The budget with the highest output throughput among those whose ITL p99 meets the SLO (None if none)."""
    ok = [(_metrics(b)[0], b) for b in budgets if _metrics(b)[1] <= itl_p99_slo_ms]
    return max(ok)[1] if ok else None


def check_exercise_1(student: Callable[[int, int, int], int]) -> None:
    cases = [(1000, 0, 256), (1000, 3, 256), (2048, 16, 512), (100, 4, 64), (5000, 32, 2048), (64, 63, 64)]
    check_cases("Exercise 1", student, [(c, steps_to_first_token(*c)) for c in cases])


def check_exercise_2(student: Callable[[list[int], int, int], list[int]]) -> None:
    cases = [
        ([6000, 400, 400, 400], 2048, 0),
        ([6000, 400, 400, 400], 2048, 1024),
        ([6000, 400, 400, 400], 2048, 512),
        ([100, 100, 100], 256, 0),
        ([300, 50, 3000, 20], 512, 128),
    ]
    check_cases("Exercise 2", student, [(c, first_step_chunks(*c)) for c in cases])


def check_exercise_3(student: Callable[[list[int], float], int | None]) -> None:
    cases = [([64, 256, 1024, 4096], 40.0), ([128, 512, 2048], 100.0), ([256, 1024, 4096], 10.0)]
    check_cases("Exercise 3", student, [(c, best_budget(*c)) for c in cases])
