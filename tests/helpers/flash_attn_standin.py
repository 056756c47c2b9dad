"""A CPU stand-in for the ``flash_attn`` package: ``flash_attn_varlen_func`` with upstream flash-attn 2.x's
signature that checks its arguments as the CUDA kernel requires them and then computes with the float64
oracle (minivllm/attention/reference.py), reading K/V through the block table as the kernel does.

What it checks is what upstream's ``mha_varlen_fwd`` (csrc/flash_attn/flash_api.cpp) and its Python
wrapper (flash_attn/flash_attn_interface.py) require for a paged-KV call, plus what the kernel would
silently get wrong (``max_seqlen_*`` below the real lengths, a query row that sees no key):

* ``q [total_q, Hq, D]``, ``k``/``v [num_blocks, page_size, Hkv, D]`` (paged), one dtype, one device
  (any: the CUDA rule is left out),
  last dimension contiguous; ``Hq % Hkv == 0``; ``D % 8 == 0`` and ``D <= 256``; page size % 256 == 0;
* ``cu_seqlens_q``/``cu_seqlens_k`` int32 ``[batch + 1]``, from 0, non-decreasing; ``cu_seqlens_q[-1]``
  is q's row count; ``cu_seqlens_k``'s differences are the per-request KV lengths (upstream has no public
  ``seqused_k``, vLLM's fork does); ``block_table`` int32 ``[batch, max_blocks]`` covering those lengths
  with ids inside the cache;
* ``causal=True`` (bottom-right), an explicit ``softmax_scale``, no dropout / window / softcap / alibi.

Every accepted call is recorded (:class:`VarlenCall`), every refusal's reason too (the engine turns an
exception in a step into aborted requests), so a test can assert on what the backend sent.
The dtypes accepted are a parameter: the real kernel takes fp16/bf16 only (the default here); the
engine test passes fp32 so that greedy tokens can be compared with HF exactly on CPU.
"""

from __future__ import annotations

import importlib.machinery
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from minivllm.attention.reference import reference_attention


class FlashAttnArgError(RuntimeError):
    """An argument the real kernel would refuse (its ``TORCH_CHECK`` raises a RuntimeError too)."""


@dataclass
class VarlenCall:
    """One accepted ``flash_attn_varlen_func`` call, as host values."""

    query_lens: list[int]
    kv_lens: list[int]
    max_seqlen_q: int
    max_seqlen_k: int
    page_size: int
    max_blocks: int
    softmax_scale: float


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise FlashAttnArgError(message)


def _check_seqlens(name: str, t: torch.Tensor, batch: int) -> list[int]:
    _check(t.dtype == torch.int32, f"{name} must have dtype torch.int32, got {t.dtype}")
    _check(t.dim() == 1 and t.shape[0] == batch + 1, f"{name} must have shape [batch + 1] = [{batch + 1}]")
    _check(t.is_contiguous(), f"{name} must be contiguous")
    values = t.tolist()
    _check(values[0] == 0, f"{name} must start at 0, got {values[0]}")
    _check(all(a <= b for a, b in zip(values, values[1:])), f"{name} must be non-decreasing: {values}")
    return [b - a for a, b in zip(values, values[1:])]


@dataclass
class FlashAttnStandIn:
    """The stand-in; ``module`` is what goes into ``sys.modules["flash_attn"]``."""

    dtypes: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
    calls: list[VarlenCall] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # why each refused call was refused
    module: types.ModuleType = field(init=False)

    def __post_init__(self) -> None:
        self.module = types.ModuleType("flash_attn", "CPU stand-in for flash-attn 2.x (tests only)")
        self.module.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None)  # find_spec() sees it
        self.module.flash_attn_varlen_func = self.flash_attn_varlen_func

    def flash_attn_varlen_func(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        dropout_p: float = 0.0,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        alibi_slopes: Any = None,
        deterministic: bool = False,
        return_attn_probs: bool = False,
        block_table: torch.Tensor | None = None,
    ) -> torch.Tensor:
        args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal)
        try:
            call = self._validate(*args, window_size, softcap, alibi_slopes, return_attn_probs, block_table)
        except FlashAttnArgError as e:
            self.rejected.append(str(e))
            raise
        self.calls.append(call)
        assert block_table is not None and softmax_scale is not None  # _validate saw to it
        num_kv_heads, head_dim = k.shape[2], k.shape[3]
        # The oracle reads the cache through the block table with these lengths; nothing new to write.
        meta = types.SimpleNamespace(
            query_start_loc=cu_seqlens_q,
            seq_lens=torch.tensor(call.kv_lens),
            block_table=block_table,
            slot_mapping=torch.empty(0, dtype=torch.int64),
        )
        no_new = q.new_empty(0, num_kv_heads, head_dim)
        out, _ = reference_attention(q, no_new, no_new, torch.stack([k, v]), meta, softmax_scale)
        return out.to(q.dtype)

    def _validate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        dropout_p: float,
        softmax_scale: float | None,
        causal: bool,
        window_size: tuple[int, int],
        softcap: float,
        alibi_slopes: Any,
        return_attn_probs: bool,
        block_table: torch.Tensor | None,
    ) -> VarlenCall:
        """Raise :class:`FlashAttnArgError` for what the kernel would refuse (or silently get wrong)."""
        if block_table is None:
            raise FlashAttnArgError("the stand-in models the paged-KV call only: block_table is required")
        _check(q.dtype in self.dtypes, f"q dtype {q.dtype} is not one of {self.dtypes}")
        _check(k.dtype == q.dtype and v.dtype == q.dtype, f"k/v dtypes {k.dtype}/{v.dtype} differ from q's {q.dtype}")
        tensors = (k, v, cu_seqlens_q, cu_seqlens_k, block_table)
        _check(all(t.device == q.device for t in tensors), "all tensors must be on q's device")
        _check(all(t.stride(-1) == 1 for t in (q, k, v)), "q/k/v must have a contiguous last dimension")
        _check(q.dim() == 3, f"q must be [total_q, num_heads, head_dim], got shape {tuple(q.shape)}")
        _check(k.dim() == 4, f"paged k must be [num_blocks, page_size, num_kv_heads, head_dim], got {tuple(k.shape)}")
        _check(v.shape == k.shape, f"v shape {tuple(v.shape)} differs from k's {tuple(k.shape)}")
        total_q, num_heads, head_dim = q.shape
        num_blocks, page_size, num_kv_heads, kv_head_dim = k.shape
        _check(kv_head_dim == head_dim, f"k/v head_dim {kv_head_dim} differs from q's {head_dim}")
        # The C++ rule (upstream's Python wrapper pads other head dims; minivllm's selector refuses them).
        _check(head_dim % 8 == 0 and head_dim <= 256, f"head_dim {head_dim} must be a multiple of 8 and <= 256")
        _check(num_heads % num_kv_heads == 0, f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
        _check(page_size % 256 == 0, f"Paged KV cache block size must be divisible by 256, got {page_size}")

        _check(block_table.dtype == torch.int32, f"block_table must have dtype torch.int32, got {block_table.dtype}")
        _check(block_table.dim() == 2 and block_table.stride(-1) == 1, "block_table must be [batch, max_blocks]")
        batch, max_blocks = block_table.shape
        _check(batch > 0, "batch size must be positive")
        q_lens = _check_seqlens("cu_seqlens_q", cu_seqlens_q, batch)
        kv_lens = _check_seqlens("cu_seqlens_k", cu_seqlens_k, batch)
        _check(sum(q_lens) == total_q, f"cu_seqlens_q ends at {sum(q_lens)}, but q has {total_q} rows")
        _check(max_seqlen_q >= max(q_lens), f"max_seqlen_q {max_seqlen_q} < the longest query {max(q_lens)}")
        _check(max_seqlen_k >= max(kv_lens), f"max_seqlen_k {max_seqlen_k} < the longest KV {max(kv_lens)}")
        for r, (nq, nk) in enumerate(zip(q_lens, kv_lens)):
            # Legal for the kernel, but with causal=True the first rows would see no key (zero output).
            _check(nk >= nq, f"request {r}: KV length {nk} < query length {nq}")
            _check(-(-nk // page_size) <= max_blocks, f"request {r}: {max_blocks} blocks cannot hold {nk} tokens")
        used = torch.cat([row[: -(-nk // page_size)] for row, nk in zip(block_table, kv_lens)])
        _check(bool(((used >= 0) & (used < num_blocks)).all()), f"block ids outside [0, {num_blocks}): {used}")

        _check(causal is True, "minivllm's chunks need causal=True (bottom-right aligned)")
        if softmax_scale is None or softmax_scale <= 0:  # upstream's default 1/sqrt(D) would hide a missing scale
            raise FlashAttnArgError(f"softmax_scale must be given, got {softmax_scale}")
        _check(dropout_p == 0.0, f"dropout_p must be 0.0 at inference, got {dropout_p}")
        _check(tuple(window_size) == (-1, -1) and softcap == 0.0 and alibi_slopes is None, "no window/softcap/alibi")
        _check(not return_attn_probs, "return_attn_probs is for testing upstream only")

        return VarlenCall(q_lens, kv_lens, max_seqlen_q, max_seqlen_k, page_size, max_blocks, float(softmax_scale))
