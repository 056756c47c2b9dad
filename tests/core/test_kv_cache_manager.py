"""KV cache manager and block pool (§11.5, §11.8.1), against vLLM v0.8.5's rules."""

from __future__ import annotations

import pytest

from minivllm.core.block_pool import BlockPool
from minivllm.core.kv_cache_manager import KVCacheManager
from minivllm.core.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock, hash_block_tokens, hash_request_tokens
from minivllm.lab.testbench import make_request


def manager(num_blocks: int = 11, block_size: int = 16, caching: bool = True) -> KVCacheManager:
    return KVCacheManager(num_blocks, block_size, max_model_len=4096, enable_caching=caching)


def admit(kv: KVCacheManager, request) -> tuple[list[int], int]:
    """Admit like the waiting loop does: prefix hit, then blocks for the rest."""
    computed, num_computed = kv.get_computed_blocks(request)
    new = kv.allocate_slots(request, request.num_tokens - num_computed, computed)
    request.num_computed_tokens = request.num_tokens
    return [b.block_id for b in computed + new], num_computed


def test_null_block_is_block_zero_and_never_handed_out():
    pool = BlockPool(4, enable_caching=True)
    assert pool.null_block.block_id == 0
    assert pool.get_num_free_blocks() == 3
    assert [b.block_id for b in pool.get_new_blocks(3)] == [1, 2, 3]
    assert pool.get_usage() == 1.0
    with pytest.raises(ValueError, match="Cannot get 1 free blocks"):
        pool.get_new_blocks(1)


def test_idle_pool_usage_counts_the_null_block():
    assert manager(num_blocks=10).usage == pytest.approx(0.1)


def test_hashes_are_chained_and_only_full_blocks_are_hashed():
    h = hash_request_tokens(hash, 4, list(range(10)))
    assert len(h) == 2
    assert h[0] == hash_block_tokens(hash, None, [0, 1, 2, 3])
    assert h[1] == hash_block_tokens(hash, h[0].hash_value, [4, 5, 6, 7])
    # Same block tokens, different prefix: different hash.
    assert hash_request_tokens(hash, 4, [9, 9, 9, 9, 4, 5, 6, 7])[1] != h[1]


def test_prefix_hit_shares_blocks_and_free_goes_back_tail_first():
    # vLLM's test_prefill: 3 common blocks + a unique tail each; freeing req0 then req1
    # leaves the free queue [6, 7, 8, 9, 10, 4, 5, 3, 2, 1].
    kv = manager()
    common = list(range(48))
    req0 = make_request("0", common + [100 + i for i in range(7)])
    req1 = make_request("1", common + [200 + i for i in range(5)])
    assert admit(kv, req0) == ([1, 2, 3, 4], 0)
    assert admit(kv, req1) == ([1, 2, 3, 5], 48)
    assert [kv.block_pool.blocks[i].ref_cnt for i in (1, 2, 3, 4, 5)] == [2, 2, 2, 1, 1]
    kv.free(req0)
    kv.free(req1)
    queue = [b.block_id for b in kv.block_pool.free_block_queue.get_all_free_blocks()]
    assert queue == [6, 7, 8, 9, 10, 4, 5, 3, 2, 1]


def test_last_token_rule_on_a_fully_cached_prompt():
    kv = manager()
    admit(kv, make_request("a", 64))
    b = make_request("b", 64)  # exactly 4 full blocks: the 4th is left out of the search
    computed, num_computed = kv.get_computed_blocks(b)
    assert num_computed == 48 and len(computed) == 3
    c = make_request("c", list(range(64)) + [7] * 6)  # 70 tokens: all 4 blocks hit
    assert kv.get_computed_blocks(c)[1] == 64
    stats = kv.make_prefix_cache_stats()
    assert (stats.requests, stats.queries, stats.hits) == (3, 3 + 3 + 4, 0 + 3 + 4)
    assert kv.make_prefix_cache_stats().queries == 0  # taken and reset


def test_hit_on_freed_blocks_revives_them_until_evicted():
    kv = manager(num_blocks=6)  # 5 usable blocks
    a = make_request("a", 40)  # blocks 1, 2 full (hashed), 3 partial
    admit(kv, a)
    kv.free(a)
    assert kv.block_pool.get_num_free_blocks() == 5
    b = make_request("b", 40)
    ids, hit = admit(kv, b)
    assert hit == 32 and ids[:2] == [1, 2]
    kv.free(b)
    # Now fill the pool with other tokens: the cached blocks are evicted on reuse.
    c = make_request("c", list(range(1000, 1080)))
    admit(kv, c)
    assert kv.block_pool.cached_block_hash_to_block.keys() == {h for h in kv.req_to_block_hashes["c"]}
    d = make_request("d", 40)
    assert kv.get_computed_blocks(d)[1] == 0


def test_allocate_slots_failure_touches_nothing():
    kv = manager(num_blocks=5)  # 4 usable
    admit(kv, make_request("a", 32))  # blocks 1, 2 cached, ref 1
    b = make_request("b", list(range(32)) + list(range(500, 548)))  # hits 2 blocks, needs 3 more
    computed, _ = kv.get_computed_blocks(b)
    assert kv.allocate_slots(b, 48, computed) is None
    assert [blk.ref_cnt for blk in computed] == [1, 1]
    assert kv.block_pool.get_num_free_blocks() == 2


def test_hit_blocks_are_not_evicted_to_serve_the_same_request():
    kv = manager(num_blocks=4)  # 3 usable
    a = make_request("a", 33)  # blocks 1, 2 full + 3 partial
    admit(kv, a)
    kv.free(a)  # queue: 3, 2, 1 (tail first); 1 and 2 still cached
    b = make_request("b", list(range(32)) + [9] * 10)
    ids, hit = admit(kv, b)
    assert hit == 32 and ids == [1, 2, 3]


def test_allocate_slots_rejects_zero_tokens():
    kv = manager()
    with pytest.raises(ValueError, match="num_tokens must be greater than 0"):
        kv.allocate_slots(make_request("a", 4), 0)


def test_caching_off_frees_in_order_and_never_hits():
    kv = manager(caching=False)
    a = make_request("a", 64)
    admit(kv, a)
    kv.free(a)
    assert [b.block_id for b in kv.block_pool.free_block_queue.get_all_free_blocks()][-4:] == [1, 2, 3, 4]
    assert kv.get_computed_blocks(make_request("b", 64)) == ([], 0)


def test_reset_prefix_cache_only_when_idle():
    kv = manager()
    a = make_request("a", 40)
    admit(kv, a)
    assert kv.reset_prefix_cache() is False
    kv.free(a)
    assert kv.reset_prefix_cache() is True
    assert kv.block_pool.cached_block_hash_to_block == {}
    assert kv.get_computed_blocks(make_request("b", 40))[1] == 0


def test_free_queue_remove_from_the_middle_and_popleft_on_empty():
    blocks = [KVCacheBlock(i) for i in range(4)]
    q = FreeKVCacheBlockQueue(blocks)
    q.remove(blocks[2])
    assert [b.block_id for b in q.get_all_free_blocks()] == [0, 1, 3]
    q.append(blocks[2])
    assert [q.popleft().block_id for _ in range(4)] == [0, 1, 3, 2]
    with pytest.raises(ValueError, match="No free blocks available"):
        q.popleft()


def test_common_prefix_blocks():
    kv = manager()
    a, b = make_request("a", 40), make_request("b", 40)
    admit(kv, a)
    admit(kv, b)
    assert kv.get_num_common_prefix_blocks(a, 2) == 2
