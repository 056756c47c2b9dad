"""Exercise checks for chapter 11.1-11.2 (prefill blocking, chunked prefill)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache, lru_cache

from minivllm.config import CacheConfig, EngineConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner

# §11.1's scene as the notebook runs it: 4 chats stream, after 4 steps a ~1,500-token prompt lands.
LONG_TOKENS, ARRIVE_AFTER, CHAT_TOKENS, MAX_MODEL_LEN = 1536, 4, 20, 2048
PRESET = "llama2_7b_a100"


def prefill_steps(prompt_len: int, budget: int, num_decoding: int) -> int:
    """What the engine does: ``num_decoding`` chats are decoding when a ``prompt_len``-token prompt
    arrives (chunked prefill, budget ``budget``); in how many steps does the prompt get tokens?"""
    scheduler = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=num_decoding + 1, max_model_len=8192),
        CacheConfig(block_size=16, num_gpu_blocks=2000, enable_prefix_caching=False),
    )
    runner = FakeModelRunner()
    chats = [
        Request(f"chat{i}", [10 + i] * 8, SamplingParams(max_tokens=prompt_len + 64, ignore_eos=True))
        for i in range(num_decoding)
    ]
    for chat in chats:
        scheduler.add_request(chat)
    for _ in run_steps(scheduler, runner):
        if all(c.num_output_tokens > 0 for c in chats):  # until every chat is decoding
            break
    long = Request("long", [7] * prompt_len, SamplingParams(max_tokens=1, ignore_eos=True))
    scheduler.add_request(long)
    steps = 0
    for out, _ in run_steps(scheduler, runner):
        steps += out.num_scheduled_tokens.get("long", 0) > 0
        if long.num_output_tokens > 0:
            break
    return steps


def check_exercise_1(student: Callable[[int, int, int], int]) -> None:
    cases = [
        ((p, b, n), prefill_steps(p, b, n))
        for p, b, n in [(1531, 128, 4), (1000, 256, 0), (200, 64, 3), (512, 512, 8), (100, 16, 15), (124, 128, 4)]
    ]
    check_cases("Exercise 1", student, cases)


@lru_cache(maxsize=1)
def _tokenizer():
    from transformers import AutoTokenizer

    from minivllm.model.loader import smollm2_folder

    return AutoTokenizer.from_pretrained(smollm2_folder())


@cache
def gpu_scene(budget: int | None) -> LLMEngine:
    """§11.1's scene in the simulator (Llama-2-7B on an A100, priced by the cost model): chunked prefill
    with token budget ``budget``, or chunking off for ``None``. Returns the finished engine (one per
    budget, run once and kept: read its trace, do not step it further)."""
    from minivllm.lab.cli.demo import run_scene
    from minivllm.lab.sim.cost_model import CostModel
    from minivllm.lab.sim.sim_runner import SimRunner

    chunked = budget is not None
    config = EngineConfig.from_kwargs(
        max_num_seqs=16,
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=chunked,
        max_num_batched_tokens=budget if chunked else MAX_MODEL_LEN,
    )
    engine = LLMEngine(config, model_runner=SimRunner(CostModel.from_preset(PRESET), config=config))
    run_scene(engine, _tokenizer(), LONG_TOKENS, arrive_after=ARRIVE_AFTER, chat_tokens=CHAT_TOKENS)
    return engine


def _worst_chat_gap_ms(budget: int | None) -> float:
    trace = gpu_scene(budget).trace
    return 1e3 * max(gap for req_id, rec in trace.requests.items() if req_id.startswith("chat") for gap in rec.itls)


def largest_budget_within(slo_ms: float, budgets: Sequence[int]) -> int | None:
    """What the simulator says: the largest budget whose worst chat gap is at most ``slo_ms``."""
    ok = [b for b in budgets if _worst_chat_gap_ms(b) <= slo_ms]
    return max(ok) if ok else None


def check_exercise_2(student: Callable[[float, Sequence[int]], int | None]) -> None:
    budgets = (64, 128, 256, 512, 1024)
    cases = [((slo, budgets), largest_budget_within(slo, budgets)) for slo in (15.0, 25.0, 50.0, 100.0, 5.0)]
    check_cases("Exercise 2", student, cases)
