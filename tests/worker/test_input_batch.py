"""The persistent input batch (minivllm/worker/input_batch.py, vLLM's gpu_input_batch.py): its rows follow the
per-request states, and the metadata and input ids built from them equal the per-request build, tensor for tensor."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from minivllm.attention.metadata import build_attention_metadata, build_attention_metadata_from_arrays
from minivllm.engine import arg_utils
from minivllm.sampling_params import SamplingParams
from minivllm.worker.input_batch import CachedRequestState, InputBatch

GREEDY, SAMPLED = SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, min_tokens=3)


def state(req_id: str, tokens: list[int], blocks: list[int], params: SamplingParams = GREEDY) -> CachedRequestState:
    return CachedRequestState(req_id, list(tokens), len(tokens), params, None, list(blocks))


def assert_rows_follow(batch: InputBatch, states: dict[str, CachedRequestState]) -> None:
    """Every state's row holds its tokens, blocks (then zeros) and numbers; rows [0, num_reqs) are the live ones."""
    assert sorted(batch.req_id_to_index) == sorted(states)
    assert sorted(batch.req_id_to_index.values()) == list(range(len(states)))
    assert batch.req_ids == sorted(states, key=batch.req_id_to_index.__getitem__)
    for req_id, s in states.items():
        r = batch.req_id_to_index[req_id]
        assert batch.token_ids[r, : batch.num_tokens[r]].tolist() == s.token_ids
        assert batch.block_table[r, : batch.num_blocks[r]].tolist() == s.block_ids
        assert not batch.block_table[r, batch.num_blocks[r] :].any()  # a gathered table's padding is 0
        assert batch.num_prompt_tokens[r] == s.num_prompt_tokens
        assert batch.num_computed_tokens[r] == s.num_computed_tokens
        assert batch.min_tokens[r] == s.sampling_params.min_tokens and batch.greedy[r] == s.sampling_params.greedy


def test_add_remove_condense_and_growth():
    b = InputBatch(max_num_reqs=2, max_model_len=4, max_num_blocks_per_req=1)
    states = {"a": state("a", [5, 6, 7], [3]), "b": state("b", [8], [4, 9], SAMPLED)}  # b: the table grows
    for s in states.values():
        b.add_request(s)
    assert b.rows_of(["b", "a"]).tolist() == [1, 0]
    b.append_sampled(np.array([0, 1]), np.array([10, 11]))
    b.append_sampled(np.array([0]), np.array([12]))  # past the initial width: the token rows grow
    states["a"].token_ids += [10, 12]
    states["b"].token_ids += [11]
    assert_rows_follow(b, states)
    states["c"] = state("c", [1, 2], [5, 6, 7])
    b.add_request(states["c"])  # more requests than rows: the arrays double
    assert b.req_id_to_index["c"] == 2 and b.token_ids.shape[0] == 4
    assert b.remove_request("a") == 0 and b.remove_request("zz") is None
    del states["a"]
    b.condense()  # the last row (c) moves into a's hole
    assert b.req_id_to_index == {"c": 0, "b": 1} and b.req_ids == ["c", "b"]
    assert_rows_follow(b, states)
    states["d"] = state("d", [4], [2])
    b.remove_request("c")
    del states["c"]
    b.add_request(states["d"])  # a hole is filled before the end grows, and its old blocks are gone
    assert b.req_id_to_index["d"] == 0
    assert_rows_follow(b, states)
    b.set_block_ids(0, [8, 9], append=True)
    b.set_block_ids(0, [6])  # resumed after preemption: the table is replaced, the rest zeroed
    states["d"].block_ids = [6]
    b.set_token_ids(0, 1, [20, 21])  # tokens the runner had not seen (a resumed request)
    states["d"].token_ids = [4, 20, 21]
    assert_rows_follow(b, states)
    b.truncate("d", 2)  # a failed step rolled back
    assert b.num_tokens[0] == 2


def test_input_ids_and_the_common_sampling_step():
    b = InputBatch(max_num_reqs=4, max_model_len=16, max_num_blocks_per_req=2)
    b.add_request(state("p", [1, 2, 3, 4, 5], [1]))  # a prompt, chunked
    b.add_request(state("d", [6, 7, 8], [2]))
    b.add_request(state("m", [9, 10], [3], SAMPLED))  # min_tokens=3
    b.num_computed_tokens[:3] = [1, 2, 1]
    rows = b.rows_of(["d", "p", "m"])
    assert b.input_ids(rows, np.array([1, 3, 1])).tolist() == [8, 2, 3, 4, 10]  # scheduler order, each from its c
    assert not b.all_plain(b.rows_of(["p"]), np.array([3]))  # a token of its prompt is still to come
    assert b.all_plain(b.rows_of(["p", "d"]), np.array([4, 1]))
    assert not b.all_plain(b.rows_of(["m"]), np.array([1]))  # no output yet, min_tokens=3
    b.append_sampled(b.rows_of(["m"]), np.array([11]))
    b.append_sampled(b.rows_of(["m"]), np.array([12]))
    b.append_sampled(b.rows_of(["m"]), np.array([13]))
    b.num_computed_tokens[2] = 4
    assert b.all_plain(b.rows_of(["m"]), np.array([1]))  # three outputs: min_tokens reached


@pytest.mark.parametrize("seed", range(6))
def test_random_scenes_build_the_per_request_metadata(seed):
    """Random adds, removes, decodes, new blocks and resumes; after each step the rows follow the states and the
    metadata from arrays (any subset of requests, any order, spec tokens, padding) equals the per-request build."""
    rng = random.Random(seed)
    block_size = rng.choice([1, 4, 16])
    batch = InputBatch(max_num_reqs=3, max_model_len=8, max_num_blocks_per_req=2)
    states: dict[str, CachedRequestState] = {}
    for step in range(40):
        for req_id in rng.sample(sorted(states), k=min(len(states), rng.randrange(3))):
            batch.remove_request(req_id)
            del states[req_id]
        for i in range(rng.randrange(4)):
            n = rng.randrange(1, 60)
            s = state(f"s{step}.{i}", [rng.randrange(1000) for _ in range(n)], [], rng.choice([GREEDY, SAMPLED]))
            s.block_ids = [rng.randrange(1, 500) for _ in range(-(-n // block_size) + rng.randrange(2))]
            states[s.req_id] = s
            batch.add_request(s)
        for s in states.values():
            row = batch.req_id_to_index[s.req_id]
            if rng.random() < 0.2:  # resumed: a new table, tokens rewritten from a point on
                s.block_ids = [rng.randrange(1, 500) for _ in range(-(-len(s.token_ids) // block_size))]
                batch.set_block_ids(row, s.block_ids)
                start = rng.randrange(len(s.token_ids))
                s.token_ids[start:] = [rng.randrange(1000) for _ in s.token_ids[start:]]
                batch.set_token_ids(row, start, s.token_ids[start:])
            s.num_computed_tokens = rng.randrange(len(s.token_ids))
            batch.num_computed_tokens[row] = s.num_computed_tokens
        batch.condense()
        assert_rows_follow(batch, states)
        if not states:
            continue
        order = rng.sample(sorted(states), k=rng.randrange(1, len(states) + 1))
        rows = batch.rows_of(order)
        computed = [states[r].num_computed_tokens for r in order]
        scheduled = [len(states[r].token_ids) - c for r, c in zip(order, computed)]
        spec = [rng.randrange(n) for n in scheduled] if rng.random() < 0.3 else None
        pad = sum(scheduled) + rng.randrange(3) if rng.random() < 0.3 else None
        want = build_attention_metadata(
            computed, scheduled, [states[r].block_ids for r in order], block_size, num_spec_tokens=spec, pad_to=pad
        )
        num_blocks = batch.num_blocks[rows]
        got = build_attention_metadata_from_arrays(
            batch.num_computed_tokens[rows],
            np.array(scheduled),
            batch.block_table[rows, : max(1, int(num_blocks.max()))],
            num_blocks,
            block_size,
            num_spec_tokens=spec,
            pad_to=pad,
        )
        for name in ("query_start_loc", "seq_lens", "block_table", "slot_mapping", "positions", "logits_indices"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and torch.equal(a, b), name
        for name in ("num_actual_tokens", "max_query_len", "max_seq_len", "query_start_loc_cpu", "seq_lens_cpu"):
            assert getattr(got, name) == getattr(want, name), name
        for r in order:  # each step's outputs: one sampled token per scheduled request
            states[r].token_ids.append(rng.randrange(1000))
        batch.append_sampled(rows, np.array([states[r].token_ids[-1] for r in order]))
        for r in order:  # new blocks as the requests grow
            s, row = states[r], batch.req_id_to_index[r]
            more = [rng.randrange(1, 500) for _ in range(max(0, -(-len(s.token_ids) // block_size) - len(s.block_ids)))]
            s.block_ids += more
            batch.set_block_ids(row, more, append=True)


def test_invalid_arrays_get_the_per_request_message():
    table = np.array([[3, 0], [4, 5]], dtype=np.int32)
    with pytest.raises(ValueError, match="request 1: block table does not cover seq_len 9"):
        build_attention_metadata_from_arrays(np.array([0, 4]), np.array([2, 5]), table, np.array([1, 2]), 4)
    with pytest.raises(ValueError, match="request 0: num_scheduled_tokens must be >= 1"):
        build_attention_metadata_from_arrays(np.array([0]), np.array([0]), table[:1], np.array([1]), 4)
    with pytest.raises(ValueError, match="empty batch"):
        build_attention_metadata_from_arrays(np.array([]), np.array([]), table[:0], np.array([]), 4)


def test_the_runner_batch_follows_its_states_through_chunks_preemption_and_prefix_hits(tiny):
    """The real runner in an engine with a small KV cache, a small budget and a shared prefix: after every step
    its persistent batch equals its per-request states (tokens, blocks, counts)."""
    engine = arg_utils.build_engine(
        loaded=tiny, model=tiny.hf_folder, device="cpu", max_num_batched_tokens=24, max_num_seqs=4,
        max_model_len=96, num_gpu_blocks=14, block_size=8,
    )  # fmt: skip
    runner = engine.model_runner
    rng = random.Random(0)
    shared = [rng.randrange(3, 200) for _ in range(12)]
    for i in range(7):
        params = SamplingParams(max_tokens=6 + i, temperature=0.0 if i % 2 else 0.9, seed=i, ignore_eos=True)
        engine.add_request(f"r{i}", shared + [rng.randrange(3, 200) for _ in range(3 + 5 * i)], params)
    preempted = 0
    while engine.has_unfinished_requests():
        engine.step()
        preempted += len(engine.trace.steps[-1].preempted)
        assert_rows_follow(runner.input_batch, runner.requests)
    assert preempted > 0 and any(s.prefix_cache_hit_tokens for s in engine.trace.steps)
