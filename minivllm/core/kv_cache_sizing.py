"""How many KV blocks fit, how long a request can be, how many max-length requests fit at once (§11.5, §11.7).

Mirrors the sizing helpers of ``vllm/v1/core/kv_cache_utils.py`` (v0.9.2: ``estimate_max_model_len``,
``check_enough_kv_cache_memory``, ``get_num_blocks``, ``get_kv_cache_config``,
``get_max_concurrency_for_kv_cache_config``, ``unify_kv_cache_configs``), adapted to minivllm's single
full-attention group: every layer must have the same spec, or ``get_kv_cache_config`` refuses (vLLM 0.9+
splits other models into several groups; 0.8.5 raised NotImplementedError too). They take minivllm's
``EngineConfig`` where vLLM takes its ``VllmConfig``; ``max_model_len`` is the SchedulerConfig's.

The arithmetic is the model runner's (``budget // block_bytes``, block_bytes summed over layers): the
available bytes are split evenly between the layers, then into pages.
"""

from __future__ import annotations

from collections.abc import Iterable

from minivllm.config import EngineConfig
from minivllm.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from minivllm.core.kv_cache_utils import cdiv

GiB_bytes = 1 << 30


def max_memory_usage_bytes(config: EngineConfig, kv_cache_specs: Iterable[FullAttentionSpec]) -> int:
    """Bytes the given layers need for one request of ``max_model_len`` tokens."""
    return sum(spec.max_memory_usage_bytes(config) for spec in kv_cache_specs)


def estimate_max_model_len(
    config: EngineConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> int:
    """The longest request (at most the configured ``max_model_len``) whose KV cache fits in
    ``available_memory`` bytes; 0 if not even one token fits. A binary search, as vLLM's (which writes
    each candidate into its ModelConfig and leaves the last one there; minivllm changes no config)."""
    current_max = config.scheduler_config.max_model_len or 0

    def fits(num_tokens: int) -> bool:
        return sum(spec.memory_for_len(num_tokens) for spec in kv_cache_spec.values()) <= available_memory

    if current_max < 1 or not fits(1):
        return 0
    left, right, result = 1, current_max, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def check_enough_kv_cache_memory(
    config: EngineConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> None:
    """ValueError unless ``available_memory`` holds one request of ``max_model_len`` tokens, saying the
    longest request that would fit."""
    if available_memory <= 0:
        raise ValueError(
            f"No memory is left for the KV cache ({available_memory} bytes): raise gpu_memory_utilization "
            "(CUDA) or kv_cache_memory_bytes (CPU)."
        )
    needed = max_memory_usage_bytes(config, kv_cache_spec.values())
    if needed > available_memory:
        max_model_len = config.scheduler_config.max_model_len
        estimate = estimate_max_model_len(config, kv_cache_spec, available_memory)
        hint = f" The longest request that fits is {estimate} tokens." if estimate > 0 else ""
        raise ValueError(
            f"One request of max_model_len ({max_model_len}) tokens needs {needed / GiB_bytes:.2f} GiB of KV "
            f"cache, more than the {available_memory / GiB_bytes:.2f} GiB available.{hint} Raise "
            "gpu_memory_utilization / kv_cache_memory_bytes or lower max_model_len."
        )


def get_uniform_page_size(kv_cache_spec: dict[str, FullAttentionSpec]) -> int:
    """The page size all layers share; ValueError if they differ."""
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if len(page_sizes) != 1:
        raise ValueError(f"kv_cache_spec: every layer must have the same page size, got {sorted(page_sizes)}.")
    return page_sizes.pop()


def get_num_blocks(config: EngineConfig, num_layers: int, available_memory: int, page_size: int) -> int:
    """Blocks per layer that fit: the bytes split evenly between layers, then into pages. An explicit
    ``cache_config.num_gpu_blocks`` (vLLM's ``num_gpu_blocks_override``) wins."""
    override = config.cache_config.num_gpu_blocks
    if override is not None:
        return override
    return max(int(available_memory // page_size // num_layers), 0)


def get_kv_cache_config(
    config: EngineConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> KVCacheConfig:
    """The KV-cache layout for a model whose layers all have one spec: one group, one tensor per layer.

    Raises ValueError when one max-length request does not fit (``check_enough_kv_cache_memory``) or when
    the layers differ (a hybrid model: vLLM 0.9+ builds several groups; minivllm has one)."""
    if not kv_cache_spec:
        raise ValueError("kv_cache_spec is empty: the model has no attention layer.")
    check_enough_kv_cache_memory(config, kv_cache_spec, available_memory)
    type_ids = {spec.type_id for spec in kv_cache_spec.values()}
    if len(type_ids) != 1:
        raise ValueError(
            f"kv_cache_spec: minivllm has one full-attention KV-cache group, so every layer needs the same "
            f"spec; got {len(type_ids)} kinds: {sorted(type_ids)}."
        )
    page_size = get_uniform_page_size(kv_cache_spec)
    num_blocks = get_num_blocks(config, len(kv_cache_spec), available_memory, page_size)
    layer_names = list(kv_cache_spec)
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[KVCacheTensor(size=page_size * num_blocks, shared_by=[name]) for name in layer_names],
        kv_cache_groups=[KVCacheGroupSpec(layer_names, kv_cache_spec[layer_names[0]])],
    )


def get_max_concurrency_for_kv_cache_config(config: EngineConfig, kv_cache_config: KVCacheConfig) -> float:
    """How many requests of ``max_model_len`` tokens the cache holds at once (vLLM logs it at start-up as
    "Maximum concurrency for N tokens per request: X.XXx"). The null block is not subtracted, as in vLLM."""
    num_layer_per_group = max(len(group.layer_names) for group in kv_cache_config.kv_cache_groups)
    specs = [group.kv_cache_spec for group in kv_cache_config.kv_cache_groups]
    max_memory_usage_per_request = num_layer_per_group * max_memory_usage_bytes(config, specs)
    memory_per_block = specs[0].page_size_bytes * num_layer_per_group
    num_block_per_request = cdiv(max_memory_usage_per_request, memory_per_block)
    return kv_cache_config.num_blocks / num_block_per_request


def unify_kv_cache_configs(kv_cache_configs: list[KVCacheConfig]) -> None:
    """Make several workers' layouts one (vLLM, for tensor/pipeline parallel workers): the same groups
    (sorted by type id) on every worker, and every worker's ``num_blocks`` the smallest. In place."""
    for kv_cache_config in kv_cache_configs:
        kv_cache_config.kv_cache_groups.sort(key=lambda group: group.kv_cache_spec.type_id)
    for kv_cache_config in kv_cache_configs[1:]:  # an invariant between workers, not a user input: assert
        assert kv_cache_config.kv_cache_groups == kv_cache_configs[0].kv_cache_groups, (
            "kv_cache_configs: every worker must have the same KV-cache groups."
        )
    num_blocks = min(kv_cache_config.num_blocks for kv_cache_config in kv_cache_configs)
    for kv_cache_config in kv_cache_configs:
        kv_cache_config.num_blocks = num_blocks
