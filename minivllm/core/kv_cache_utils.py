"""KV-cache building blocks: chained block hashes, blocks, the LRU free list (§11.5, §11.8.1).

Mirrors ``vllm/v1/core/kv_cache_utils.py`` (v0.8.5). Pure Python: a block here
is only metadata (id, reference count, hash); the K/V tensors live in the
executor, indexed by ``block_id``.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


class BlockHashType(NamedTuple):
    """The prefix-cache key of one full block. The whole tuple is the key, so two
    blocks whose hash values collide but whose tokens differ never match."""

    hash_value: int
    token_ids: tuple[int, ...]
    extra_keys: Any | None = None


def cdiv(a: int, b: int) -> int:
    """Ceiling division, as ``vllm.utils.cdiv``."""
    return -(a // -b)


def sha256_hash(obj: Any) -> int:
    """``vllm.utils.sha256``: a collision-resistant alternative to builtin ``hash``."""
    return int.from_bytes(hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest(), "big")


# The parent of every request's first block. vLLM draws it at random (or from
# PYTHONHASHSEED); minivllm fixes it so notebooks print the same hashes every run.
NONE_HASH: int = sha256_hash("minivllm NONE_HASH")

# ``caching_hash_algo`` -> hash function. vLLM's KVCacheManager takes sha256 for "sha256" and builtin ``hash`` for
# anything else; its own tests spell the builtin one "hash". minivllm takes both spellings and refuses other
# names (a typo should not silently mean "builtin"). CacheConfig.prefix_caching_hash_algo allows only vLLM's
# CacheConfig values, "builtin" and "sha256".
HASH_FUNCTIONS: dict[str, Callable[[Any], int]] = {"builtin": hash, "hash": hash, "sha256": sha256_hash}


def get_hash_fn(caching_hash_algo: str) -> Callable[[Any], int]:
    """The hash function named ``caching_hash_algo``; ValueError naming the allowed values otherwise."""
    if not isinstance(caching_hash_algo, str) or caching_hash_algo not in HASH_FUNCTIONS:
        raise ValueError(f"caching_hash_algo must be one of {tuple(HASH_FUNCTIONS)}, got {caching_hash_algo!r}.")
    return HASH_FUNCTIONS[caching_hash_algo]


def hash_block_tokens(
    hash_fn: Callable[[Any], int],
    parent_block_hash: int | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: Any | None = None,
) -> BlockHashType:
    """Hash one full block, chained to its parent: equal hashes mean equal *prefixes*."""
    parent = parent_block_hash if parent_block_hash else NONE_HASH
    tokens = tuple(curr_block_token_ids)
    return BlockHashType(hash_fn((parent, tokens, extra_keys)), tokens, extra_keys)


def block_extra_keys(start_token_idx: int, cache_salt: str | None) -> tuple[str, ...] | None:
    """The extra keys of the block starting at ``start_token_idx`` (vLLM's ``generate_block_hash_extra_keys``,
    which also adds LoRA ids and multimodal hashes; minivllm has neither). The salt goes into the *first*
    block only (vLLM 0.9+): every later block chains to it through its parent hash, so one salt's blocks
    can never match another salt's (or an unsalted request's)."""
    return (cache_salt,) if start_token_idx == 0 and cache_salt else None


def hash_request_tokens(
    hash_fn: Callable[[Any], int], block_size: int, token_ids: Sequence[int], cache_salt: str | None = None
) -> list[BlockHashType]:
    """Hashes of every *full* block of ``token_ids`` (a partial last block has none).

    vLLM passes the request; minivllm passes its tokens (``request.all_token_ids``) and its ``cache_salt``."""
    hashes: list[BlockHashType] = []
    parent: int | None = None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        extra_keys = block_extra_keys(start, cache_salt)
        block_hash = hash_block_tokens(hash_fn, parent, token_ids[start : start + block_size], extra_keys)
        hashes.append(block_hash)
        parent = block_hash.hash_value
    return hashes


class KVCacheBlock:
    """One physical KV block's metadata, and its links in the free list."""

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self._block_hash: BlockHashType | None = None
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None

    def incr_ref(self) -> None:
        self.ref_cnt += 1

    def decr_ref(self) -> None:
        self.ref_cnt -= 1

    @property
    def block_hash(self) -> BlockHashType | None:
        return self._block_hash

    @block_hash.setter
    def block_hash(self, block_hash: BlockHashType) -> None:
        if self._block_hash is not None:
            raise RuntimeError(f"block {self.block_id} already has a hash; reset_hash() first")
        self._block_hash = block_hash

    def reset_hash(self) -> None:
        self._block_hash = None

    def __repr__(self) -> str:
        h = None if self._block_hash is None else self._block_hash.hash_value % 10**6
        return f"KVCacheBlock(id={self.block_id}, ref_cnt={self.ref_cnt}, hash=..{h})"


class FreeKVCacheBlockQueue:
    """A doubly linked list of free blocks: evict from the head (least recently
    freed), free to the tail, and take a block out of the middle in O(1) when a
    prefix-cache hit revives it."""

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.free_list_head: KVCacheBlock | None = blocks[0] if blocks else None
        self.free_list_tail: KVCacheBlock | None = blocks[-1] if blocks else None
        for prev, nxt in zip(blocks, blocks[1:]):
            prev.next_free_block = nxt
            nxt.prev_free_block = prev

    def popleft(self) -> KVCacheBlock:
        if self.free_list_head is None:
            raise ValueError("No free blocks available")
        block = self.free_list_head
        self.remove(block)
        return block

    def remove(self, block: KVCacheBlock) -> None:
        if block.prev_free_block is not None:
            block.prev_free_block.next_free_block = block.next_free_block
        if block.next_free_block is not None:
            block.next_free_block.prev_free_block = block.prev_free_block
        if block is self.free_list_head:
            self.free_list_head = block.next_free_block
        if block is self.free_list_tail:
            self.free_list_tail = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        if self.free_list_tail is not None:
            self.free_list_tail.next_free_block = block
            block.prev_free_block = self.free_list_tail
        else:
            self.free_list_head = block
        self.free_list_tail = block
        self.num_free_blocks += 1

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Free blocks from head (next to be evicted) to tail."""
        out, block = [], self.free_list_head
        while block is not None:
            out.append(block)
            block = block.next_free_block
        return out


@dataclass
class PrefixCacheStats:
    """Prefix-cache counters since the last take (v0.8.5 counts *blocks*)."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


class PrefixCachingMetrics:
    """The prefix-cache hit rate over the most recent requests (vLLM's ``PrefixCachingMetrics``, in
    ``vllm/v1/core/kv_cache_utils.py``): what the periodic log line prints.

    ``observe`` takes one step's :class:`PrefixCacheStats`. Once more than ``max_recent_requests`` requests
    are aggregated, the oldest step's numbers are dropped (one step per observe, as vLLM does). A stats
    record with ``reset`` set (the prefix cache was reset) clears everything first.
    """

    def __init__(self, max_recent_requests: int = 1000) -> None:
        if isinstance(max_recent_requests, bool) or not isinstance(max_recent_requests, int) or max_recent_requests < 1:
            raise ValueError(f"max_recent_requests must be an integer >= 1, got {max_recent_requests!r}.")
        self.max_recent_requests = max_recent_requests
        self.aggregated_requests = 0
        self.aggregated_query_total = 0
        self.aggregated_query_hit = 0
        self.query_queue: deque[tuple[int, int, int]] = deque()  # (requests, queries, hits) per observe

    def observe(self, stats: PrefixCacheStats) -> None:
        if stats.reset:
            self.reset()
        self.query_queue.append((stats.requests, stats.queries, stats.hits))
        self.aggregated_requests += stats.requests
        self.aggregated_query_total += stats.queries
        self.aggregated_query_hit += stats.hits
        if self.aggregated_requests > self.max_recent_requests:
            old_requests, old_queries, old_hits = self.query_queue.popleft()
            self.aggregated_requests -= old_requests
            self.aggregated_query_total -= old_queries
            self.aggregated_query_hit -= old_hits

    def reset(self) -> None:
        self.aggregated_requests = self.aggregated_query_total = self.aggregated_query_hit = 0
        self.query_queue.clear()

    @property
    def hit_rate(self) -> float:
        return self.aggregated_query_hit / self.aggregated_query_total if self.aggregated_query_total else 0.0
