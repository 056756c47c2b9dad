"""KV-cache sizing as vLLM's kv_cache_utils does it (0.9.2), for minivllm's one full-attention group (§11.5, §11.7):
estimate_max_model_len, get_kv_cache_config, get_max_concurrency_for_kv_cache_config, unify_kv_cache_configs."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from minivllm.config import EngineConfig
from minivllm.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from minivllm.core.kv_cache_sizing import (
    GiB_bytes,
    estimate_max_model_len,
    get_kv_cache_config,
    get_max_concurrency_for_kv_cache_config,
    unify_kv_cache_configs,
)

# core/ is torch-free: a spec takes any dtype with an ``itemsize`` (a torch.dtype has one); these stand in for them.
FLOAT32 = SimpleNamespace(itemsize=4, name="float32")
FLOAT16 = SimpleNamespace(itemsize=2, name="float16")
BFLOAT16 = SimpleNamespace(itemsize=2, name="bfloat16")


# SmolLM2-135M's attention: 30 layers, 3 KV heads of 64, fp32 on a CPU.
NUM_LAYERS, PAGE = 30, 2 * 16 * 3 * 64 * 4  # bytes of one 16-token block of one layer


def smollm2_specs(block_size: int = 16, dtype: object = FLOAT32) -> dict[str, FullAttentionSpec]:
    return {f"layers.{i}.self_attn": FullAttentionSpec(block_size, 3, 64, dtype) for i in range(NUM_LAYERS)}


def config(max_model_len: int = 2048, **kwargs) -> EngineConfig:
    return EngineConfig.from_kwargs(max_model_len=max_model_len, **kwargs)


def test_a_spec_counts_k_and_v_pages_of_its_dtype():
    spec = FullAttentionSpec(block_size=16, num_kv_heads=3, head_size=64, dtype=BFLOAT16)
    assert spec.page_size_bytes == 2 * 16 * 3 * 64 * 2
    assert FullAttentionSpec(16, 3, 64, BFLOAT16, use_mla=True).page_size_bytes == 16 * 3 * 64 * 2
    assert spec.type_id == f"full_attention_16_{spec.page_size_bytes}"
    assert spec.max_memory_usage_bytes(config(max_model_len=33)) == 3 * spec.page_size_bytes  # whole blocks
    with pytest.raises(ValueError, match="num_kv_heads must be an integer >= 1, got 0"):
        FullAttentionSpec(16, 0, 64, FLOAT32)
    with pytest.raises(ValueError, match="dtype must be a dtype with an itemsize"):
        FullAttentionSpec(16, 3, 64, "float32")


@pytest.mark.parametrize(
    "max_model_len, num_pages, want",
    [
        (2048, 10, 160),  # 10 pages per layer hold 160 tokens
        (100, 10, 100),  # never more than max_model_len
        (2048, 9.99, 144),  # a page short of 10: whole blocks only
        (2048, 0.5, 0),  # not even one block
    ],
)
def test_estimate_max_model_len(max_model_len, num_pages, want):
    cfg = config(max_model_len=max_model_len)
    available = int(num_pages * PAGE * NUM_LAYERS)
    assert estimate_max_model_len(cfg, smollm2_specs(), available) == want
    assert cfg.scheduler_config.max_model_len == max_model_len  # the search leaves the config alone


def test_kv_cache_config_splits_memory_evenly_between_layers():
    kv = get_kv_cache_config(config(), smollm2_specs(), GiB_bytes)
    assert kv.num_blocks == GiB_bytes // (PAGE * NUM_LAYERS)  # the model runner's budget // block_bytes
    assert len(kv.kv_cache_tensors) == NUM_LAYERS
    assert {t.size for t in kv.kv_cache_tensors} == {PAGE * kv.num_blocks}
    assert [t.shared_by for t in kv.kv_cache_tensors][:2] == [["layers.0.self_attn"], ["layers.1.self_attn"]]
    (group,) = kv.kv_cache_groups
    assert len(group.layer_names) == NUM_LAYERS and group.kv_cache_spec == smollm2_specs()["layers.0.self_attn"]
    # An explicit num_gpu_blocks wins (vLLM's num_gpu_blocks_override).
    assert get_kv_cache_config(config(num_gpu_blocks=100), smollm2_specs(), GiB_bytes).num_blocks == 100


def test_kv_cache_config_refuses_too_little_memory_saying_what_fits():
    with pytest.raises(ValueError, match=r"max_model_len \(2048\).*The longest request that fits is 160 tokens"):
        get_kv_cache_config(config(), smollm2_specs(), 10 * PAGE * NUM_LAYERS)
    with pytest.raises(ValueError, match="No memory is left for the KV cache"):
        get_kv_cache_config(config(), smollm2_specs(), 0)


def test_kv_cache_config_refuses_layers_that_differ():
    specs = smollm2_specs()
    specs["layers.29.self_attn"] = FullAttentionSpec(16, 6, 64, FLOAT32)  # a different head count
    with pytest.raises(ValueError, match="one full-attention KV-cache group.*got 2 kinds"):
        get_kv_cache_config(config(), specs, GiB_bytes)


@pytest.mark.parametrize("max_model_len, want", [(160, 10.0), (150, 10.0), (170, 100 / 11)])
def test_max_concurrency_counts_whole_blocks_per_request(max_model_len, want):
    kv = get_kv_cache_config(config(max_model_len=max_model_len, num_gpu_blocks=100), smollm2_specs(), GiB_bytes)
    assert get_max_concurrency_for_kv_cache_config(config(max_model_len=max_model_len), kv) == pytest.approx(want)


def _layout(num_blocks: int, heads: tuple[int, int]) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"l{i}"], FullAttentionSpec(16, h, 64, FLOAT16)) for i, h in enumerate(heads)]
    return KVCacheConfig(num_blocks, [KVCacheTensor(1, [f"l{i}"]) for i in range(2)], groups)


def test_unify_gives_every_worker_the_fewest_blocks():
    same = [_layout(30, (2, 4)), _layout(20, (2, 4))]
    unify_kv_cache_configs(same)
    assert [c.num_blocks for c in same] == [20, 20]
    swapped = [_layout(30, (2, 4)), copy.deepcopy(_layout(25, (2, 4)))]
    swapped[1].kv_cache_groups.reverse()  # the same groups in another order: sorted first
    unify_kv_cache_configs(swapped)
    assert [c.num_blocks for c in swapped] == [25, 25]
    with pytest.raises(AssertionError, match="same KV-cache groups"):
        unify_kv_cache_configs([_layout(30, (2, 4)), _layout(30, (2, 8))])
