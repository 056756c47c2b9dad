"""vLLM's names where its own tests/v1/core reach (0.8.5): PrefixCachingMetrics, the log_stats switch,
SchedulerStats.prefix_cache_stats / spec_decoding_stats (SpecDecodingStats), the caching_hash_algo
spellings, and block sizes below 8 on the KV cache manager. Shaped as vLLM's tests; cases are our own."""

from __future__ import annotations

import pytest

from minivllm.config import CacheConfig, SchedulerConfig, SpeculativeConfig
from minivllm.core.kv_cache_manager import KVCacheManager
from minivllm.core.kv_cache_utils import PrefixCacheStats, PrefixCachingMetrics, hash_block_tokens, sha256_hash
from minivllm.core.output import ModelRunnerOutput, SpecDecodingStats
from minivllm.core.scheduler import Scheduler
from minivllm.lab.testbench import make_request


def test_prefix_caching_metrics_keep_a_window_of_recent_requests():
    metrics = PrefixCachingMetrics(max_recent_requests=4)
    assert metrics.hit_rate == 0.0  # nothing queried yet
    metrics.observe(PrefixCacheStats(requests=2, queries=10, hits=4))
    assert metrics.hit_rate == pytest.approx(0.4)
    metrics.observe(PrefixCacheStats(requests=2, queries=30, hits=3))
    assert (metrics.aggregated_requests, metrics.aggregated_query_total, metrics.aggregated_query_hit) == (4, 40, 7)
    # A fifth request pushes the window over 4: the oldest observation (2 requests) leaves, once.
    metrics.observe(PrefixCacheStats(requests=1, queries=5, hits=5))
    assert (metrics.aggregated_requests, metrics.aggregated_query_total, metrics.aggregated_query_hit) == (3, 35, 8)
    assert len(metrics.query_queue) == 2
    assert metrics.hit_rate == pytest.approx(8 / 35)
    # reset_prefix_cache() marks the next stats: the window starts again from them.
    metrics.observe(PrefixCacheStats(reset=True, requests=1, queries=4, hits=1))
    assert (metrics.aggregated_requests, metrics.hit_rate) == (1, 0.25)
    metrics.reset()
    assert metrics.hit_rate == 0.0 and metrics.aggregated_requests == 0 and not metrics.query_queue


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_prefix_caching_metrics_refuse_a_bad_window(bad):
    with pytest.raises(ValueError, match=rf"max_recent_requests must be an integer >= 1, got {bad!r}"):
        PrefixCachingMetrics(max_recent_requests=bad)


def test_prefix_cache_stats_off_with_log_stats_false():
    kv = KVCacheManager(num_gpu_blocks=11, block_size=16, max_model_len=512, log_stats=False)
    assert kv.prefix_cache_stats is None
    req = make_request("a", 40)
    computed, num_computed = kv.get_computed_blocks(req)
    kv.allocate_slots(req, 40 - num_computed, computed)
    kv.free(req)
    assert kv.reset_prefix_cache()
    assert kv.prefix_cache_stats is None and kv.make_prefix_cache_stats() is None


def _scheduler(log_stats: bool = True, num_spec_tokens: int = 0, caching: bool = True) -> Scheduler:
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=8, max_model_len=256),
        CacheConfig(block_size=16, num_gpu_blocks=64, enable_prefix_caching=caching),
        speculative_config=SpeculativeConfig(num_speculative_tokens=num_spec_tokens),
        log_stats=log_stats,
    )


def _sample(scheduler: Scheduler, out, tokens: dict[str, list[int]], drafts=None):
    ids = out.req_ids
    runner = ModelRunnerOutput(ids, {r: i for i, r in enumerate(ids)}, [tokens[r] for r in ids], drafts)
    return scheduler.update_from_output(out, runner)


def test_scheduler_stats_carry_the_prefix_cache_counters_of_the_step():
    s = _scheduler()
    s.add_request(make_request("a", 40))
    first = _sample(s, s.schedule(), {"a": [7]}).scheduler_stats
    assert first is not None
    assert (first.prefix_cache_stats.requests, first.prefix_cache_stats.queries) == (1, 2)  # 40 tokens: 2 full blocks
    s.add_request(make_request("b", 40))  # same 40 tokens: both full blocks hit
    second = _sample(s, s.schedule(), {"a": [7], "b": [7]}).scheduler_stats
    assert second is not None
    pcs = second.prefix_cache_stats
    assert (pcs.requests, pcs.queries, pcs.hits) == (1, 2, 2)  # taken per step, not cumulative
    assert (second.num_running_reqs, second.num_waiting_reqs) == (2, 0)


def test_scheduler_reports_no_stats_with_log_stats_false_and_decides_the_same():
    tables = []
    for log_stats in (True, False):
        s = _scheduler(log_stats=log_stats)
        for i in range(3):
            s.add_request(make_request(str(i), 100 + 30 * i, max_tokens=3))
        table = []
        while s.has_unfinished_requests():
            out = s.schedule()
            table.append(dict(out.num_scheduled_tokens))
            core = _sample(s, out, {r: [5] for r in out.req_ids})
            assert (core.scheduler_stats is None) == (not log_stats)
        tables.append(table)
    assert tables[0] == tables[1]


# (drafts proposed after step 1, tokens sampled in step 2, expected (drafts, draft tokens, accepted, per position))
SPEC_CASES = [
    ([[4, 4]], [[4, 4, 9]], (1, 2, 2, [1, 1])),  # both accepted, plus the bonus token
    ([[4, 4]], [[8]], (1, 2, 0, [0, 0])),  # the first draft rejected
    ([[1, 2], [3, 4]], [[1, 6], [3, 4, 5]], (2, 4, 3, [2, 1])),
    ([[2], []], [[2, 3], [6]], (1, 1, 1, [1, 0])),  # a request without drafts is no draft
    ([[], []], [[1], [2]], None),  # nobody drafted: no stats at all
]


@pytest.mark.parametrize("drafts, sampled, expected", SPEC_CASES)
def test_spec_decoding_stats_sum_the_verified_drafts(drafts, sampled, expected):
    s = _scheduler(num_spec_tokens=2, caching=False)
    reqs = [make_request(str(i), 5, max_tokens=10) for i in range(len(drafts))]
    for r in reqs:
        s.add_request(r)
    core = _sample(s, s.schedule(), {r.request_id: [0] for r in reqs}, drafts)
    assert core.scheduler_stats is not None and core.scheduler_stats.spec_decoding_stats is None  # proposed only
    out = s.schedule()
    for r, d in zip(reqs, drafts):
        assert out.num_scheduled_tokens[r.request_id] == 1 + len(d)
    core = _sample(s, out, {r.request_id: t for r, t in zip(reqs, sampled)})
    assert core.scheduler_stats is not None
    stats = core.scheduler_stats.spec_decoding_stats
    if expected is None:
        assert stats is None
        return
    assert stats is not None
    got = (stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens, stats.num_accepted_tokens_per_pos)
    assert got == expected
    # The trace's per-request view and vLLM's summed view agree.
    assert sum(core.scheduler_stats.spec_accepted.values()) == stats.num_accepted_tokens


def test_spec_decoding_stats_refuse_more_accepted_than_drafted():
    stats = SpecDecodingStats.new(num_spec_tokens=3)
    with pytest.raises(ValueError, match=r"num_accepted_tokens must be in \[0, 2\]"):
        stats.observe_draft(num_draft_tokens=2, num_accepted_tokens=3)


@pytest.mark.parametrize(
    "algo, hash_fn", [("builtin", hash), ("hash", hash), ("sha256", sha256_hash)], ids=["builtin", "hash", "sha256"]
)
def test_caching_hash_algo_names_the_hash_of_every_full_block(algo, hash_fn):
    kv = KVCacheManager(num_gpu_blocks=11, block_size=16, max_model_len=512, caching_hash_algo=algo)
    tokens = [t % 7 for t in range(40)]
    req = make_request("a", tokens)
    computed, _ = kv.get_computed_blocks(req)
    kv.allocate_slots(req, 40, computed)
    parent = None
    for i, block in enumerate(kv.req_to_blocks["a"][:2]):
        expected = hash_block_tokens(hash_fn, parent, tokens[16 * i : 16 * (i + 1)])
        assert block.block_hash == expected
        parent = expected.hash_value
    assert kv.req_to_blocks["a"][2].block_hash is None  # 8 tokens: not full, not cached


def test_an_unknown_caching_hash_algo_is_refused():
    with pytest.raises(ValueError, match=r"caching_hash_algo must be one of \('builtin', 'hash', 'sha256'\)"):
        KVCacheManager(num_gpu_blocks=11, block_size=16, max_model_len=512, caching_hash_algo="md5")
    # The user-facing config keeps vLLM's CacheConfig values.
    with pytest.raises(ValueError, match="prefix_caching_hash_algo must be 'builtin' or 'sha256'"):
        CacheConfig(prefix_caching_hash_algo="hash")


@pytest.mark.parametrize("block_size", [2, 3, 4])
def test_small_blocks_on_the_kv_cache_manager(block_size):
    # vLLM's own tests build the manager with blocks of 2, 3 and 4 tokens; CacheConfig (what a user sets)
    # keeps vLLM 0.8.5's sizes, where 2 and 4 are not (BlockSize = Literal[1, 8, ..., 128] through 0.11).
    kv = KVCacheManager(num_gpu_blocks=12, block_size=block_size, max_model_len=100)
    req = make_request("a", 7)
    new = kv.allocate_slots(req, 7, num_lookahead_tokens=2)
    assert new is not None and len(new) == -(-(7 + 2) // block_size)
    again = make_request("b", list(range(7)) + [99])
    computed, num_computed = kv.get_computed_blocks(again)
    assert num_computed == 7 // block_size * block_size and len(computed) == 7 // block_size
    with pytest.raises(ValueError, match="block_size must be one of"):
        CacheConfig(block_size=block_size)


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_the_kv_cache_manager_refuses_a_bad_block_size(bad):
    with pytest.raises(ValueError, match=rf"block_size must be an integer >= 1, got {bad!r}"):
        KVCacheManager(num_gpu_blocks=12, block_size=bad, max_model_len=100)
