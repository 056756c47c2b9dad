"""What one layer's KV cache looks like, and how the whole cache is laid out (§11.5).

Mirrors ``vllm/v1/kv_cache_interface.py`` (v0.9 shapes: ``KVCacheTensor(size, shared_by)``,
``KVCacheConfig(num_blocks, kv_cache_tensors, kv_cache_groups)``), for full attention only: minivllm's
models (Llama, Qwen2, Mistral without sliding window) have one kind of layer, so the cache is one
group of layers sharing one block table. vLLM also has sliding-window, MLA-only and Mamba specs and
several groups for hybrid models (its KV-cache coordinator, 0.10+); see ``README_vllm_after_085.md``.

A spec is pure arithmetic: ``dtype`` is anything with ``itemsize`` (a ``torch.dtype`` has it), so core/
stays free of torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minivllm.config import EngineConfig
from minivllm.core.kv_cache_utils import cdiv


def get_dtype_size(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (``vllm.utils.get_dtype_size``)."""
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"dtype must be a dtype with an itemsize (e.g. torch.float16), got {dtype!r}.")
    return size


@dataclass
class FullAttentionSpec:
    """One full-attention layer's KV cache: K and V (MLA: one latent) for ``block_size`` tokens per page."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: Any
    use_mla: bool = False

    def __post_init__(self) -> None:
        for name in ("block_size", "num_kv_heads", "head_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
        get_dtype_size(self.dtype)

    @property
    def type_id(self) -> str:
        """Layers with equal type ids can share one block table (one KV-cache group)."""
        return f"full_attention_{self.block_size}_{self.page_size_bytes}"

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of this layer."""
        coef = 1 if self.use_mla else 2
        return coef * self.block_size * self.num_kv_heads * self.head_size * get_dtype_size(self.dtype)

    def max_memory_usage_bytes(self, config: EngineConfig) -> int:
        """This layer's bytes for one request of ``max_model_len`` tokens (vLLM reads it from its
        ModelConfig; minivllm keeps ``max_model_len`` in the SchedulerConfig)."""
        return self.memory_for_len(config.scheduler_config.max_model_len or 0)

    def memory_for_len(self, num_tokens: int) -> int:
        """This layer's bytes for one request of ``num_tokens`` tokens: whole blocks."""
        return cdiv(num_tokens, self.block_size) * self.page_size_bytes


@dataclass
class KVCacheTensor:
    """One tensor the worker allocates: ``size`` bytes, used by the layers in ``shared_by``."""

    size: int
    shared_by: list[str]


@dataclass
class KVCacheGroupSpec:
    """Layers that share one block table (in minivllm: all of them)."""

    layer_names: list[str]
    kv_cache_spec: FullAttentionSpec


@dataclass
class KVCacheConfig:
    """How the KV cache is laid out: ``num_blocks`` blocks per layer, the tensors, the groups."""

    num_blocks: int
    kv_cache_tensors: list[KVCacheTensor]
    kv_cache_groups: list[KVCacheGroupSpec]
