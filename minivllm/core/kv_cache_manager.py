"""KVCacheManager: which blocks each request owns, and prefix-cache lookups (§11.5, §11.8.1).

Mirrors ``vllm/v1/core/kv_cache_manager.py`` (v0.8.5, full attention only; ``allocate_slots`` also has
later vLLM's ``full_sequence_must_fit`` admission gate, off unless ``scheduler_reserve_full_isl`` is on).
Two questions drive the scheduler: "how much of this prompt is already cached?"
(``get_computed_blocks``) and "are there blocks for n more tokens?"
(``allocate_slots``, which answers None when the pool runs dry: the cue to
preempt, never an error).
"""

from __future__ import annotations

from collections import defaultdict

from minivllm.core.block_pool import BlockPool
from minivllm.core.kv_cache_utils import (
    BlockHashType,
    KVCacheBlock,
    PrefixCacheStats,
    cdiv,
    get_hash_fn,
    hash_request_tokens,
)
from minivllm.request import Request


class KVCacheManager:
    """Per-request block lists on top of one shared BlockPool.

    vLLM builds it from a ``KVCacheConfig`` (``minivllm.core.kv_cache_interface``); minivllm has one
    full-attention group, so it takes that config's two numbers, ``num_gpu_blocks`` and ``block_size``.
    ``block_size`` may be any size >= 1 here, as in vLLM, whose own tests use 2, 3 and 4; the sizes a user
    may configure are CacheConfig's (``minivllm.config.BLOCK_SIZES``: vLLM 0.8.5's list, which has no 2 or 4).

    ``log_stats`` (vLLM's switch): count prefix-cache requests / queries / hits in ``prefix_cache_stats``;
    off, ``prefix_cache_stats`` and ``make_prefix_cache_stats()`` are None. vLLM defaults it to False;
    minivllm to True, because the Scheduler always reports them (it takes ``log_stats`` too).
    """

    def __init__(
        self,
        num_gpu_blocks: int,
        block_size: int,
        max_model_len: int,
        enable_caching: bool = True,
        caching_hash_algo: str = "builtin",
        log_stats: bool = True,
    ) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}.")
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks
        self.max_model_len = max_model_len
        self.max_num_blocks_per_req = cdiv(max_model_len, block_size)
        self.enable_caching = enable_caching
        self.hash_fn = get_hash_fn(caching_hash_algo)
        self.log_stats = log_stats
        self.block_pool = BlockPool(num_gpu_blocks, enable_caching)
        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)
        self.req_to_block_hashes: defaultdict[str, list[BlockHashType]] = defaultdict(list)
        self.num_cached_block: dict[str, int] = {}  # blocks of a request already in the hash map
        self.prefix_cache_stats: PrefixCacheStats | None = PrefixCacheStats() if log_stats else None

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        """Take the counters gathered since the last call, and start new ones (None with log_stats off)."""
        if self.prefix_cache_stats is None:
            return None
        stats, self.prefix_cache_stats = self.prefix_cache_stats, PrefixCacheStats()
        return stats

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The longest chain of *full* cached blocks that prefixes ``request``'s tokens.

        Last-token rule: a hit never covers the last token, because that token's
        logits must be computed to sample the next one. When the tokens fill whole
        blocks, the last block is left out of the search and recomputed.
        """
        if not self.enable_caching:
            return [], 0
        block_hashes = self.req_to_block_hashes[request.request_id]
        if not block_hashes:
            block_hashes = hash_request_tokens(self.hash_fn, self.block_size, request.all_token_ids, request.cache_salt)
            self.req_to_block_hashes[request.request_id] = block_hashes
        stats = self.prefix_cache_stats
        if stats is not None:
            stats.requests += 1
        if request.sampling_params.prompt_logprobs is not None:  # every prompt position's logits are needed (vLLM)
            return [], 0

        searchable = block_hashes
        if len(block_hashes) * self.block_size == request.num_tokens:
            searchable = block_hashes[:-1]
        computed: list[KVCacheBlock] = []
        for block_hash in searchable:  # stop at the first miss: hashes are chained
            block = self.block_pool.get_cached_block(block_hash)
            if block is None:
                break
            computed.append(block)

        if stats is not None:
            stats.queries += len(searchable)
            stats.hits += len(computed)
        return computed, len(computed) * self.block_size

    def allocate_slots(
        self,
        request: Request,
        num_tokens: int,
        new_computed_blocks: list[KVCacheBlock] | None = None,
        num_lookahead_tokens: int = 0,
        full_sequence_must_fit: bool = False,
    ) -> list[KVCacheBlock] | None:
        """Make room for ``num_tokens`` more tokens of ``request``.

        Returns the newly allocated blocks, or None (touching nothing) when the
        pool cannot supply them. Hit blocks are referenced *before* new blocks are
        popped, so a hit can never be evicted to serve the same request.

        ``full_sequence_must_fit`` (later vLLM's admission gate, §11.8.3): also answer None unless the free
        blocks could hold the request's whole sequence (``request.num_tokens``, hit blocks counted as
        present). Only the check grows: the blocks allocated are still those of the ``num_tokens``.
        """
        if num_tokens <= 0:
            raise ValueError("num_tokens must be greater than 0")
        new_computed_blocks = new_computed_blocks or []
        req_blocks = self.req_to_blocks[request.request_id]

        num_computed_tokens = request.num_computed_tokens + len(new_computed_blocks) * self.block_size
        num_required_blocks = cdiv(num_computed_tokens + num_tokens + num_lookahead_tokens, self.block_size)
        num_new_blocks = num_required_blocks - len(req_blocks) - len(new_computed_blocks)
        # Hit blocks that sit in the free list stop being free once touched.
        num_evictable_computed_blocks = sum(1 for b in new_computed_blocks if b.ref_cnt == 0)
        num_free_blocks = self.block_pool.get_num_free_blocks() - num_evictable_computed_blocks
        if full_sequence_must_fit:
            num_full_blocks = cdiv(min(request.num_tokens, self.max_model_len), self.block_size)
            if num_full_blocks - len(req_blocks) - len(new_computed_blocks) > num_free_blocks:
                return None
        if num_new_blocks > num_free_blocks:
            return None

        if self.enable_caching:
            self.block_pool.touch(new_computed_blocks)
        req_blocks.extend(new_computed_blocks)

        new_blocks: list[KVCacheBlock] = []
        if num_new_blocks > 0:
            num_new_blocks = min(
                num_new_blocks,
                self.block_pool.get_num_free_blocks(),
                self.max_num_blocks_per_req - len(req_blocks),
            )
            new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
            req_blocks.extend(new_blocks)

        if self.enable_caching:
            # Draft (speculative) tokens are never cached: their K/V may be rejected. Nor are tokens not known yet
            # (async scheduling: a decode scheduled before its input was sampled); vLLM caps at num_tokens too.
            num_to_cache = min(num_computed_tokens + num_tokens - len(request.spec_token_ids), request.num_tokens)
            self.num_cached_block.setdefault(request.request_id, len(new_computed_blocks))
            self.cache_blocks(request, num_to_cache)
        return new_blocks

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Register in the prefix cache the request's blocks that the first ``num_computed_tokens`` tokens fill
        (vLLM 0.10's ``cache_blocks``). ``allocate_slots`` calls it; so does the AsyncScheduler once a token
        scheduled before it was known arrives."""
        if not self.enable_caching:
            return
        req_blocks = self.req_to_blocks[request.request_id]
        num_cached_blocks = self.num_cached_block.get(request.request_id, 0)
        num_full_blocks = min(num_computed_tokens // self.block_size, len(req_blocks))
        if num_full_blocks > num_cached_blocks:  # most decode steps fill no block: nothing to register
            self.block_pool.cache_full_blocks(
                request.all_token_ids,
                req_blocks,
                self.req_to_block_hashes[request.request_id],
                num_cached_blocks,
                num_full_blocks,
                self.block_size,
                self.hash_fn,
                request.cache_salt,
            )
        self.num_cached_block[request.request_id] = max(num_cached_blocks, num_full_blocks)

    def free(self, request: Request) -> None:
        """Give back every block of ``request`` (finished, aborted or preempted).

        With caching on, blocks go back tail-first, so a request's last blocks are
        evicted before its first ones: the shared-prefix head survives longest.
        """
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.block_pool.free_blocks(reversed(blocks) if self.enable_caching else blocks)
        self.num_cached_block.pop(request.request_id, None)

    def uncache_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Forget the hashes of the request's blocks from the one holding token ``num_computed_tokens`` on:
        a failed step registered them in the cache but never wrote their KV (``minivllm.core.rollback``)."""
        for block in self.req_to_blocks.get(request_id, [])[num_computed_tokens // self.block_size :]:
            self.block_pool._maybe_evict_cached_block(block)

    def free_block_hashes(self, request: Request) -> None:
        """Forget a finished request's hashes (kept across preemption for recovery)."""
        self.req_to_block_hashes.pop(request.request_id, None)

    def reset_prefix_cache(self) -> bool:
        ok = self.block_pool.reset_prefix_cache()
        if ok and self.prefix_cache_stats is not None:
            self.prefix_cache_stats.reset = True
        return ok

    def get_block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self.req_to_blocks.get(request_id, [])]

    def get_num_common_prefix_blocks(self, request: Request, num_running_requests: int) -> int:
        """Leading blocks of ``request`` shared by every running request (cascade attention hint)."""
        count = 0
        for block in self.req_to_blocks.get(request.request_id, []):
            if block.ref_cnt != num_running_requests:
                break
            count += 1
        return count
