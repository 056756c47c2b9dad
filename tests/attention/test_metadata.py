"""AttentionMetadata builder (§11.6): the worked examples and the validation messages."""

from __future__ import annotations

import pytest
import torch

from minivllm.attention.metadata import build_attention_metadata


def test_worked_example_block_size_4():
    meta = build_attention_metadata([5, 0, 8], [1, 6, 3], [[7, 3], [1, 9], [4, 6, 2]], block_size=4)
    assert meta.positions.tolist() == [5, 0, 1, 2, 3, 4, 5, 8, 9, 10]
    assert meta.slot_mapping.tolist() == [13, 4, 5, 6, 7, 36, 37, 8, 9, 10]
    assert meta.query_start_loc.tolist() == [0, 1, 7, 10]
    assert meta.seq_lens.tolist() == [6, 6, 11]
    assert meta.max_query_len == 6
    assert meta.max_seq_len == 11
    assert meta.logits_indices.tolist() == [0, 6, 9]
    assert meta.num_actual_tokens == 10
    assert meta.block_size == 4
    assert meta.query_start_loc_cpu == [0, 1, 7, 10]
    assert meta.seq_lens_cpu == [6, 6, 11]
    assert meta.num_reqs == 3
    assert meta.plan is None
    # Block table padded with 0 (the null block id) to the longest row.
    assert meta.block_table.tolist() == [[7, 3, 0], [1, 9, 0], [4, 6, 2]]


def test_dtypes_and_device():
    meta = build_attention_metadata([0], [3], [[2]], block_size=4, device=torch.device("cpu"))
    assert meta.query_start_loc.dtype == torch.int32
    assert meta.seq_lens.dtype == torch.int32
    assert meta.block_table.dtype == torch.int32
    assert meta.slot_mapping.dtype == torch.int64
    assert meta.positions.dtype == torch.int64
    assert meta.logits_indices.dtype == torch.int64
    assert all(t.device.type == "cpu" for t in (meta.query_start_loc, meta.slot_mapping, meta.block_table))


def test_spec_decode_logits_indices():
    scheduled = [4, 100, 3, 100, 2]  # cumulative: [4, 104, 107, 207, 209]
    drafts = [3, 0, 2, 0, 1]
    block_ids = [list(range(10 * r, 10 * r + 7)) for r in range(5)]
    meta = build_attention_metadata([0] * 5, scheduled, block_ids, block_size=16, num_spec_tokens=drafts)
    assert meta.query_start_loc.tolist() == [0, 4, 104, 107, 207, 209]
    assert meta.logits_indices.tolist() == [0, 1, 2, 3, 103, 104, 105, 106, 206, 207, 208]


def test_spec_all_zero_matches_plain():
    args = ([5, 0, 8], [1, 6, 3], [[7, 3], [1, 9], [4, 6, 2]], 4)
    plain = build_attention_metadata(*args)
    spec = build_attention_metadata(*args, num_spec_tokens=[0, 0, 0])
    assert torch.equal(plain.logits_indices, spec.logits_indices)


def test_pad_to_adds_skipped_slots():
    meta = build_attention_metadata([5, 0], [1, 2], [[7, 3], [1]], block_size=4, pad_to=6)
    assert meta.num_actual_tokens == 3
    assert meta.slot_mapping.tolist() == [13, 4, 5, -1, -1, -1]
    assert meta.positions.tolist() == [5, 0, 1, 0, 0, 0]
    assert meta.query_start_loc_cpu == [0, 1, 3]
    assert meta.logits_indices.tolist() == [0, 2]


def test_extra_blocks_allowed_and_block_size_1():
    meta = build_attention_metadata([2], [2], [[9, 8, 7, 6, 5, 4]], block_size=1)
    assert meta.slot_mapping.tolist() == [7, 6]
    assert meta.positions.tolist() == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            dict(num_computed_tokens=[0, 4], num_scheduled_tokens=[3, 2], block_ids=[[1], [2]]),
            "request 1: block table does not cover seq_len 6 with block_size 4: needs 2 blocks, given 1",
        ),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[3, 2], block_ids=[[1], [2]]),
            "per-request lists differ in length",
        ),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[0], block_ids=[[1]]),
            "request 0: num_scheduled_tokens must be >= 1",
        ),
        (
            dict(num_computed_tokens=[-1], num_scheduled_tokens=[1], block_ids=[[1]]),
            "request 0: num_computed_tokens must be >= 0",
        ),
        (dict(num_computed_tokens=[0], num_scheduled_tokens=[2], block_ids=[[-1]]), "negative block id"),
        (dict(num_computed_tokens=[], num_scheduled_tokens=[], block_ids=[]), "empty batch"),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[2], block_ids=[[1]], num_spec_tokens=[2]),
            "request 0: num_spec_tokens must be in [0, num_scheduled_tokens)",
        ),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[2], block_ids=[[1]], num_spec_tokens=[0, 1]),
            "num_spec_tokens has 2 entries for 1 requests",
        ),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[2], block_ids=[[1]], pad_to=1),
            "pad_to=1 is smaller than the 2 scheduled tokens",
        ),
        (
            dict(num_computed_tokens=[0], num_scheduled_tokens=[2], block_ids=[[1]], block_size=0),
            "block_size must be >= 1",
        ),
    ],
)
def test_validation_errors(kwargs, message):
    kwargs = {"block_size": 4, **kwargs}
    with pytest.raises(ValueError) as err:
        build_attention_metadata(**kwargs)
    assert message in str(err.value)
