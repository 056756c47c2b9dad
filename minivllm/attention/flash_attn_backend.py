"""Optional upstream FlashAttention-2 backend (ch.4 §4 "paged attention"), a GPU cross-check only.

Mirrors the forward of ``vllm/v1/attention/backends/flash_attn.py``: write new K/V first, then one
``flash_attn_varlen_func`` call over the whole mixed batch with ``causal=True`` (bottom-right aligned,
as the chunk rule needs) and the cache passed as ``k``/``v`` with a ``block_table``. Upstream FA2 (PyPI
``flash-attn``) differs from vLLM's fork in two ways that shape this file:

* no public ``seqused_k``: the per-request KV length comes from ``cu_seqlens_k = [0] + cumsum(seq_lens)``;
* the paged-KV page size must be a multiple of 256 (``get_attn_backend`` checks it), fp16/bf16, CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minivllm.attention.backend import AttentionBackend, write_kv_cache
from minivllm.attention.metadata import AttentionMetadata


@dataclass
class FlashAttnPlan:
    cu_seqlens_k: torch.Tensor  # int32 [R+1] on device


class FlashAttnBackend(AttentionBackend):
    """``flash_attn_varlen_func`` with a paged cache; imported lazily (``flash_attn`` is optional)."""

    name = "flash_attn"

    def prepare(self, meta: AttentionMetadata) -> None:
        seq_lens = meta.seq_lens.to(torch.int32)
        zero = torch.zeros(1, dtype=torch.int32, device=seq_lens.device)
        meta.plan = FlashAttnPlan(torch.cat([zero, torch.cumsum(seq_lens, 0, dtype=torch.int32)]))

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kv_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        from flash_attn import flash_attn_varlen_func

        if not isinstance(meta.plan, FlashAttnPlan):
            self.prepare(meta)
        plan = meta.plan
        assert isinstance(plan, FlashAttnPlan)  # prepare() built it; tells the type checker
        write_kv_cache(k, v, kv_cache, meta.slot_mapping)
        n = meta.num_actual_tokens
        out = torch.zeros_like(q)  # padding rows stay 0
        out[:n] = flash_attn_varlen_func(
            q=q[:n],
            k=kv_cache[0],
            v=kv_cache[1],
            cu_seqlens_q=meta.query_start_loc,
            cu_seqlens_k=plan.cu_seqlens_k,
            max_seqlen_q=meta.max_query_len,
            max_seqlen_k=meta.max_seq_len,
            softmax_scale=scale,
            causal=True,
            block_table=meta.block_table,
        )
        return out
