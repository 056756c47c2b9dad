"""Exercise checks for §11.6 (varlen batch metadata)."""

from __future__ import annotations

from collections.abc import Callable

from minivllm.attention.metadata import build_attention_metadata
from minivllm.attention.torch_backend import build_torch_plan
from minivllm.lab.exercises.common import check_cases


def query_start_loc(num_scheduled: list[int]) -> list[int]:
    """What the metadata builder computes for a batch with these chunk sizes."""
    computed = [0] * len(num_scheduled)
    blocks = [list(range(1, n + 2)) for n in num_scheduled]  # block size 1: every table is long enough
    return build_attention_metadata(computed, list(num_scheduled), blocks, 1).query_start_loc.tolist()


def slot_mapping(num_computed: int, num_scheduled: int, block_ids: list[int], block_size: int) -> list[int]:
    """The physical slots the metadata builder gives one request's new tokens."""
    meta = build_attention_metadata([num_computed], [num_scheduled], [list(block_ids)], block_size)
    return meta.slot_mapping.tolist()


def attention_kind(num_computed: int, num_scheduled: int) -> str:
    """How the torch backend attends for one request: "decode", "causal" or "chunk"."""
    blocks = list(range(1, num_computed + num_scheduled + 2))
    meta = build_attention_metadata([num_computed], [num_scheduled], [blocks], 1)
    return build_torch_plan(meta).requests[0].kind


def check_exercise_1(student: Callable[[list[int]], list[int]]) -> None:
    cases = [[1024, 1, 128], [1, 1, 1, 1], [7], [3, 300, 1, 12, 1]]
    check_cases("Exercise 1", student, [((c,), query_start_loc(c)) for c in cases])


def check_exercise_2(student: Callable[[int, int, list[int], int], list[int]]) -> None:
    cases = [
        (0, 5, [7, 3], 4),
        (5, 1, [7, 3], 4),
        (8, 3, [4, 6, 2], 4),
        (14, 4, [9, 1, 5, 12], 16),
        (1024, 4, list(range(20, 148)), 16),
    ]
    check_cases("Exercise 2", student, [(c, slot_mapping(*c)) for c in cases])


def check_exercise_3(student: Callable[[int, int], str]) -> None:
    cases = [(0, 128), (300, 1), (1024, 1024), (0, 1), (5, 2), (16, 1)]
    check_cases("Exercise 3", student, [(c, attention_kind(*c)) for c in cases])
