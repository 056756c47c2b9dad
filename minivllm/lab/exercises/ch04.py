"""Exercise checks for chapter 4 (paged attention)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from minivllm.attention.metadata import build_attention_metadata
from minivllm.attention.torch_backend import TorchAttentionBackend
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.common import check_cases
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams


def engine_slot_mapping(num_computed: int, num_scheduled: int, block_table: list[int], block_size: int) -> list[int]:
    """What the engine does: the slot_mapping rows of a one-request step."""
    meta = build_attention_metadata([num_computed], [num_scheduled], [list(block_table)], block_size)
    return meta.slot_mapping.tolist()


def check_exercise_1(student: Callable[[int, int, list[int], int], list[int]]) -> None:
    cases = [
        (5, 1, [7, 3], 4),  # a decode at position 5
        (0, 6, [1, 9], 4),  # a fresh prompt crossing a block boundary
        (8, 3, [4, 6, 2], 4),
        (45, 45, [4, 5, 6, 8, 9, 10], 16),  # a second chunk, scattered blocks
        (16, 1, [2, 7], 16),  # the first token of a new block
    ]
    check_cases("Exercise 1", student, [(args, engine_slot_mapping(*args)) for args in cases])


def engine_mask(q_len: int, seq_len: int) -> list[list[bool]]:
    """Measure the mask the torch backend applies: with all-zero queries every visible key gets the same
    weight, and with one-hot values the output row shows which keys were averaged."""
    meta = build_attention_metadata([seq_len - q_len], [q_len], [list(range(1, seq_len + 1))], block_size=1)
    q = torch.zeros(q_len, 1, seq_len, dtype=torch.float64)
    cache = torch.zeros(2, seq_len + 1, 1, 1, seq_len, dtype=torch.float64)
    cache[1, 1:, 0, 0] = torch.eye(seq_len, dtype=torch.float64)  # V[j] = e_j for the cached context
    k = torch.zeros(q_len, 1, seq_len, dtype=torch.float64)
    v = torch.eye(seq_len, dtype=torch.float64)[seq_len - q_len :].unsqueeze(1)  # this step's values
    out = TorchAttentionBackend().forward(q, k, v, cache, meta, scale=1.0)
    return (out[:, 0] > 0).tolist()


def check_exercise_2(student: Callable[[int, int], list[list[bool]]]) -> None:
    cases = [(3, 8), (1, 5), (4, 4), (2, 3), (5, 12)]

    def answer(q_len: int, seq_len: int):
        got = student(q_len, seq_len)
        if isinstance(got, torch.Tensor):
            got = got.tolist()
        return None if got is None else [[bool(x) for x in row] for row in got]

    check_cases("Exercise 2", answer, [(args, engine_mask(*args)) for args in cases])


def scheduler_steps(budget: int, prompt_lens: list[int], max_tokens: int = 6) -> list[tuple[list[int], list[int]]]:
    """Replay a workload on the real Scheduler; per step, (query lens, seq lens) in batch order."""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=16, max_model_len=2048),
        CacheConfig(block_size=16, num_gpu_blocks=400, enable_prefix_caching=False),
    )
    for i, n in enumerate(prompt_lens):
        s.add_request(Request(f"r{i}", [3 + (i + j) % 500 for j in range(n)], SamplingParams(max_tokens=max_tokens)))
    steps = []
    for out, _ in run_steps(s):
        before = out.num_computed_tokens
        q = [out.num_scheduled_tokens[r] for r in out.req_ids]
        steps.append((q, [before[r] + n for r, n in zip(out.req_ids, q)]))
    return steps


def check_exercise_3(student: Callable[[list[int], list[int]], int]) -> None:
    cases = []
    for budget, prompts in ((64, [10, 200, 30]), (128, [500, 20, 20, 20, 40]), (32, [7, 9])):
        for q, L in scheduler_steps(budget, prompts):
            cases.append(((q, L), len(q) * max(q) * max(L) - sum(a * b for a, b in zip(q, L))))
    check_cases("Exercise 3", student, cases)
