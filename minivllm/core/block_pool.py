"""BlockPool: every KV block, the free list, and the prefix-cache map (§11.5, §11.8.1).

Mirrors ``vllm/v1/core/block_pool.py`` (v0.8.5). Block 0 is the *null block*:
it is taken at start-up and never handed out. A freed block keeps its hash and
stays findable until it is popped for reuse (lazy eviction), so a finished
request's prefix can still be hit by the next request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from minivllm.core.kv_cache_utils import (
    BlockHashType,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    block_extra_keys,
    hash_block_tokens,
)


class BlockPool:
    """Hands out blocks, takes them back, and remembers which full blocks hold which prefixes."""

    def __init__(self, num_gpu_blocks: int, enable_caching: bool) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(f"num_gpu_blocks must be at least 2 (one is the null block), got {num_gpu_blocks}.")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # hash -> {block_id: block}: the same prefix may sit in several blocks.
        self.cached_block_hash_to_block: dict[BlockHashType, dict[int, KVCacheBlock]] = {}
        self.null_block = self.free_block_queue.popleft()

    def get_cached_block(self, block_hash: BlockHashType) -> KVCacheBlock | None:
        """The first block registered under ``block_hash``, or None."""
        blocks = self.cached_block_hash_to_block.get(block_hash)
        return next(iter(blocks.values())) if blocks else None

    def cache_full_blocks(
        self,
        all_token_ids: Sequence[int],
        blocks: list[KVCacheBlock],
        block_hashes: list[BlockHashType],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        hash_fn: Callable[[Any], int],
        cache_salt: str | None = None,
    ) -> None:
        """Register blocks ``[num_cached_blocks, num_full_blocks)`` in the prefix cache.

        Hashes already known (computed at admission) are reused; blocks filled by
        decoding get their hash computed here and appended to ``block_hashes``.
        vLLM passes the request; minivllm passes its tokens and its ``cache_salt`` (first block only).
        """
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            if i < len(block_hashes):
                block_hash = block_hashes[i]
            else:
                parent = None
                if i > 0:
                    parent_hash = blocks[i - 1].block_hash
                    assert parent_hash is not None  # block i - 1 is full and was registered before block i
                    parent = parent_hash.hash_value
                tokens = all_token_ids[i * block_size : (i + 1) * block_size]
                block_hash = hash_block_tokens(hash_fn, parent, tokens, block_extra_keys(i * block_size, cache_salt))
                block_hashes.append(block_hash)
            block.block_hash = block_hash
            self.cached_block_hash_to_block.setdefault(block_hash, {})[block.block_id] = block

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` from the head of the free list, evicting their old hashes."""
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        ret = []
        for _ in range(num_blocks):
            block = self.free_block_queue.popleft()
            if self.enable_caching:
                self._maybe_evict_cached_block(block)
            block.incr_ref()
            ret.append(block)
        return ret

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        block_hash = block.block_hash
        if block_hash is None or block_hash not in self.cached_block_hash_to_block:
            return False
        block.reset_hash()
        bucket = self.cached_block_hash_to_block[block_hash]
        bucket.pop(block.block_id, None)
        if not bucket:
            del self.cached_block_hash_to_block[block_hash]
        return True

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """A prefix hit: take the blocks out of the free list (if free) and reference them."""
        for block in blocks:
            if block.ref_cnt == 0 and block is not self.null_block:
                self.free_block_queue.remove(block)
            block.incr_ref()

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference each; blocks nobody owns go to the tail of the free list
        in the order given (the caller passes a request's blocks tail-first)."""
        for block in ordered_blocks:
            block.decr_ref()
            if block.ref_cnt == 0 and block is not self.null_block:
                self.free_block_queue.append(block)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash; only allowed when no request holds a block."""
        num_used = self.num_gpu_blocks - self.get_num_free_blocks()
        if num_used != 1:  # only the null block may be in use
            return False
        self.cached_block_hash_to_block = {}
        for block in self.blocks:
            block.reset_hash()
        return True

    def evict_free_cached_blocks(self) -> int:
        """Forget the hash of every free block (they stay free); returns how many. Not in vLLM: a failed
        async step may have registered blocks it never wrote, and some may be free by now
        (``AsyncScheduler.roll_back_steps``)."""
        return sum(self._maybe_evict_cached_block(b) for b in self.free_block_queue.get_all_free_blocks())

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of blocks in use; the null block counts as used (v0.8.5)."""
        return 1.0 - self.get_num_free_blocks() / self.num_gpu_blocks

    def snapshot(self) -> list[dict[str, Any]]:
        """Per block: id, ref_cnt, hash value (or None) and whether it is free.
        Cheap enough for small pools; figures draw the KV block map from it."""
        free_ids = {b.block_id for b in self.free_block_queue.get_all_free_blocks()}
        return [
            {
                "block_id": b.block_id,
                "ref_cnt": b.ref_cnt,
                "hash": None if b.block_hash is None else b.block_hash.hash_value,
                "free": b.block_id in free_ids,
                "null": b is self.null_block,
            }
            for b in self.blocks
        ]
