"""The attention-backend interface (book ch.4 §4 "paged attention"; §11.6).

Mirrors the ``AttentionBackend``/``AttentionImpl`` split of ``vllm/v1/attention/backends/`` (e.g.
``flash_attn.py``); choosing one is :mod:`minivllm.attention.selector`'s job. Every backend consumes exactly the same
:class:`~minivllm.attention.metadata.AttentionMetadata` and the same one-layer cache layout
``[2, num_blocks, block_size, num_kv_heads, head_dim]`` (index 0 = K, 1 = V), so backends are
interchangeable and test each other.

Order inside ``forward`` (vLLM V1): write this step's K/V through ``slot_mapping`` first, then attend
over all ``seq_lens[r]`` cached positions of each request with the bottom-right causal rule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch

from minivllm.attention.metadata import AttentionMetadata


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


def write_kv_cache(
    k: torch.Tensor, v: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor, all_valid: bool | None = None
) -> None:
    """Store new K/V rows at their physical slots (``vllm`` ``reshape_and_cache_flash``); -1 = skip.

    ``all_valid``: whether every one of the ``k.shape[0]`` slots is >= 0, when the caller knows it already (the
    torch backend's plan checks once per step, not once per layer); None: checked here.
    """
    num_slots = kv_cache.shape[1] * kv_cache.shape[2]
    flat = kv_cache.view(2, num_slots, kv_cache.shape[3], kv_cache.shape[4])
    slots = slot_mapping[: k.shape[0]]
    if all_valid is True and slots.device.type != "cuda":
        flat[0].index_copy_(0, slots, k.to(kv_cache.dtype))
        flat[1].index_copy_(0, slots, v.to(kv_cache.dtype))
        return
    valid = slots >= 0
    # A boolean index syncs on CUDA; the Triton backend has its own writer that needs no sync.
    if slots.device.type == "cuda" or not bool(valid.all()):
        idx = slots[valid]
        k, v = k[valid], v[valid]
    else:
        idx = slots
    flat[0].index_copy_(0, idx, k.to(kv_cache.dtype))
    flat[1].index_copy_(0, idx, v.to(kv_cache.dtype))
