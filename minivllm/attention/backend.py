"""The attention-backend interface and its selection (book ch.4 §4 "paged attention"; §11.6).

Mirrors the ``AttentionBackend``/``AttentionImpl`` split of ``vllm/v1/attention/backends/`` (e.g.
``flash_attn.py``) and ``vllm/attention/selector.py``. Every backend consumes exactly the same
:class:`~minivllm.attention.metadata.AttentionMetadata` and the same one-layer cache layout
``[2, num_blocks, block_size, num_kv_heads, head_dim]`` (index 0 = K, 1 = V), so backends are
interchangeable and test each other.

Order inside ``forward`` (vLLM V1): write this step's K/V through ``slot_mapping`` first, then attend
over all ``seq_lens[r]`` cached positions of each request with the bottom-right causal rule.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from abc import ABC, abstractmethod
from typing import ClassVar

import torch

from minivllm.attention.metadata import AttentionMetadata

logger = logging.getLogger(__name__)

BACKEND_NAMES = ("auto", "torch", "triton", "flash_attn")
ENV_VAR = "MINIVLLM_ATTENTION_BACKEND"
_TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_logged: set[tuple[str, str, torch.dtype, int]] = set()


class AttentionBackend(ABC):
    """One attention implementation for the paged, varlen, mixed prefill+decode batch."""

    name: ClassVar[str]

    def prepare(self, meta: AttentionMetadata) -> None:
        """Build ``meta.plan`` once per step (host side); every layer then reuses it. Default: no plan."""
        meta.plan = None

    @abstractmethod
    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kv_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        """Attention for one layer.

        ``q [T, Hq, D]``, ``k``/``v [T, Hkv, D]`` are this step's tokens; ``kv_cache`` is
        ``[2, num_blocks, block_size, Hkv, D]``. Writes ``k``/``v`` into the cache at ``slot_mapping``
        (skipping -1) first, then returns ``[T, Hq, D]`` in ``q``'s dtype (padding rows are 0).
        """


def write_kv_cache(k: torch.Tensor, v: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Store new K/V rows at their physical slots (``vllm`` ``reshape_and_cache_flash``); -1 = skip."""
    num_slots = kv_cache.shape[1] * kv_cache.shape[2]
    flat = kv_cache.view(2, num_slots, kv_cache.shape[3], kv_cache.shape[4])
    slots = slot_mapping[: k.shape[0]]
    valid = slots >= 0
    # A boolean index syncs on CUDA; the Triton backend has its own writer that needs no sync.
    if slots.device.type == "cuda" or not bool(valid.all()):
        idx = slots[valid]
        k, v = k[valid], v[valid]
    else:
        idx = slots
    flat[0].index_copy_(0, idx, k.to(kv_cache.dtype))
    flat[1].index_copy_(0, idx, v.to(kv_cache.dtype))


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def triton_interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _check_triton(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the triton backend cannot run here, or None."""
    if not triton_available():
        return "the 'triton' package is not importable"
    if device.type != "cuda" and not triton_interpreting():
        return f"device is {device.type!r}, not CUDA (set TRITON_INTERPRET=1 to run the kernel on CPU)"
    if dtype not in _TRITON_DTYPES:
        return f"dtype {dtype} is not one of float16, bfloat16, float32"
    return None


def _check_flash_attn(device: torch.device, dtype: torch.dtype, block_size: int, head_dim: int) -> str | None:
    """Why the upstream FlashAttention-2 backend cannot run here, or None."""
    if importlib.util.find_spec("flash_attn") is None:
        return "the 'flash_attn' package is not importable"
    if device.type != "cuda":
        return f"device is {device.type!r}; flash_attn needs CUDA"
    if dtype not in _FLASH_DTYPES:
        return f"dtype {dtype} is not float16 or bfloat16"
    if block_size % 256 != 0:
        return f"block_size {block_size} is not a multiple of 256 (upstream FA2 paged-KV rule)"
    if head_dim > 256 or head_dim % 8 != 0:
        return f"head_dim {head_dim} must be a multiple of 8 and <= 256"
    return None


def _resolve_name(name: str | None) -> str:
    if name is None or name == "auto":
        name = os.environ.get(ENV_VAR) or "auto"
        source = f"environment variable {ENV_VAR}"
    else:
        source = "argument"
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown attention backend {name!r} (from {source}); allowed: {', '.join(BACKEND_NAMES)}")
    return name


def get_attn_backend(
    name: str | None,
    device: torch.device | str,
    dtype: torch.dtype,
    block_size: int,
    head_dim: int,
) -> AttentionBackend:
    """Pick a backend. ``auto``: triton on CUDA when it can run, else torch. Explicit names never fall back."""
    device = torch.device(device)
    name = _resolve_name(name)
    if name == "auto":
        name = "triton" if device.type == "cuda" and _check_triton(device, dtype) is None else "torch"
        reason = None
    elif name == "triton":
        reason = _check_triton(device, dtype)
    elif name == "flash_attn":
        reason = _check_flash_attn(device, dtype, block_size, head_dim)
    else:
        reason = None if dtype.is_floating_point else f"dtype {dtype} is not a floating-point type"
    if reason is not None:
        raise ValueError(f"attention backend {name!r} cannot be used: {reason}")

    if name == "torch":
        from minivllm.attention.torch_backend import TorchAttentionBackend as cls
    elif name == "triton":
        from minivllm.attention.triton_backend import TritonAttentionBackend as cls
    else:
        from minivllm.attention.flash_attn_backend import FlashAttnBackend as cls
    if (key := (name, str(device), dtype, block_size)) not in _logged:
        _logged.add(key)
        logger.info("attention backend: %s (device=%s, dtype=%s, block_size=%d)", name, device, dtype, block_size)
    return cls()
