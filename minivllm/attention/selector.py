"""Choosing an attention backend (book ch.4 §4; §11.6); mirrors ``vllm/attention/selector.py``.

Kept apart from the backends (as vLLM does) so that the base class never imports its subclasses:
``get_attn_backend`` imports the chosen backend's module only when it is picked.
"""

from __future__ import annotations

import importlib.util
import logging
import os

import torch

from minivllm.attention.backend import AttentionBackend
from minivllm.attention.triton_utils import triton_available, triton_interpreting

logger = logging.getLogger(__name__)

BACKEND_NAMES = ("auto", "torch", "triton", "flash_attn")
ENV_VAR = "MINIVLLM_ATTENTION_BACKEND"
_TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_logged: set[tuple[str, str, torch.dtype, int]] = set()  # (backend, device, dtype, block_size) already logged


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

    cls: type[AttentionBackend]
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
