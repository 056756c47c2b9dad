"""Paged varlen attention: metadata contract (§11.6) and interchangeable backends (ch.4 §4).

Importing this package never imports ``triton`` or ``flash_attn``; backends that need them load them
when first used (see :func:`get_attn_backend`).
"""

from minivllm.attention.backend import AttentionBackend, write_kv_cache
from minivllm.attention.metadata import AttentionMetadata, build_attention_metadata
from minivllm.attention.selector import BACKEND_NAMES, get_attn_backend
from minivllm.attention.torch_backend import TorchAttentionBackend

__all__ = [
    "BACKEND_NAMES",
    "AttentionBackend",
    "AttentionMetadata",
    "TorchAttentionBackend",
    "build_attention_metadata",
    "get_attn_backend",
    "write_kv_cache",
]
