"""KV blocks after the profiling run's activation reserve (§11.7): more budget, fewer blocks."""

from __future__ import annotations

import pytest

from minivllm.lab.metrics.summary import summarize
from minivllm.lab.sim.memory import GiB, MemoryModel, llama2_7b
from minivllm.lab.sim.run import simulate
from minivllm.lab.sim.workload import make_workload

TOY = MemoryModel(
    name="toy",
    gpu_memory_bytes=1000,
    weights_bytes=300,
    kv_bytes_per_token=2,
    activation_bytes_per_token=1,
    activation_bytes_per_seq=10,
    gpu_memory_utilization=0.9,
)


def test_blocks_are_memory_minus_weights_minus_the_activation_peak_by_hand():
    assert TOY.activation_peak(64, 4) == 64 + 40
    assert TOY.kv_cache_bytes(64, 4) == 900 - 300 - 104
    assert TOY.num_blocks(64, 4, block_size=16) == (900 - 300 - 104) // 32
    assert TOY.activation_peak(2, 8) == 2 + 20  # no more dummy requests than tokens
    with pytest.raises(ValueError, match="no memory left for the KV cache with max_num_batched_tokens=600"):
        TOY.num_blocks(600, 4)


def test_llama2_7b_loses_blocks_as_the_budget_grows():
    mem = llama2_7b(24)
    blocks = [mem.num_blocks(b, 256) for b in (512, 2048, 8192, 16384)]
    assert blocks == sorted(blocks, reverse=True) and blocks[0] > blocks[-1]
    per_token = (3 * 11008 + 2 * 4096) * 2  # the MLP's intermediates + residual + hidden, bf16
    assert mem.activation_peak(16384, 256) - mem.activation_peak(8192, 256) == 8192 * per_token
    lost = (blocks[0] - blocks[-1]) / blocks[0]
    assert 0.10 < lost < 0.20  # a 24 GiB pool for a 7B model is tight: ~14% of it goes
    big = llama2_7b(80)
    assert (big.num_blocks(512, 256) - big.num_blocks(16384, 256)) / big.num_blocks(512, 256) < 0.03
    assert mem.gpu_memory_bytes == 24 * GiB


def test_simulate_with_memory_is_opt_in_and_sizes_the_pool():
    w = make_workload("uniform", 6, seed=0, vocab_size=32000, max_model_len=1024)
    common = dict(max_num_seqs=4, max_model_len=1024)
    plain = simulate(w.requests, max_num_batched_tokens=512, num_gpu_blocks=500, **common)
    assert plain.engine is not None and plain.engine.config.cache_config.num_gpu_blocks == 500
    mem = llama2_7b(24)
    r = simulate(w.requests, max_num_batched_tokens=512, memory=mem, **common)
    assert r.ok and r.engine is not None
    assert r.engine.config.cache_config.num_gpu_blocks == mem.num_blocks(512, 4, 16)
    assert summarize(r.trace).num_output_tokens == summarize(plain.trace).num_output_tokens
    both = simulate(w.requests, max_num_batched_tokens=512, memory=mem, num_gpu_blocks=500, **common)
    assert not both.ok and "either memory or num_gpu_blocks" in both.message
    tiny = MemoryModel("tiny", 20 * GiB, 19 * GiB, 524288, 82432, 256000)
    refused = simulate(w.requests, max_num_batched_tokens=512, memory=tiny, **common)
    assert refused.engine is None and "no memory left for the KV cache" in refused.message
