"""An attention backend that runs another one and compares every output with the torch backend's on the same
inputs: a per-layer, per-step check inside whole-engine runs, finer than the greedy tokens (§11.6)."""

from __future__ import annotations

import dataclasses

import torch

from minivllm.attention.backend import AttentionBackend
from minivllm.attention.metadata import AttentionMetadata
from minivllm.attention.torch_backend import TorchAttentionBackend


class CrossCheckedBackend(AttentionBackend):
    """Delegates to ``inner`` (its plan, its output); ``max_abs_diff`` is the largest gap to the torch
    backend's output over all calls, computed on a copy of the cache as it was before the call, and
    ``cache_mismatches`` counts calls after which the two caches (both written) differ at all."""

    name = "cross_checked"

    def __init__(self, inner: AttentionBackend) -> None:
        self.inner = inner
        self.reference = TorchAttentionBackend()
        self.max_abs_diff = 0.0
        self.num_calls = 0
        self.cache_mismatches = 0

    def prepare(self, meta: AttentionMetadata) -> None:
        self.inner.prepare(meta)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kv_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        cache_before = kv_cache.clone()
        out = self.inner.forward(q, k, v, kv_cache, meta, scale)
        want = self.reference.forward(q, k, v, cache_before, dataclasses.replace(meta, plan=None), scale)
        self.max_abs_diff = max(self.max_abs_diff, (out.float() - want.float()).abs().max().item())
        self.num_calls += 1
        self.cache_mismatches += not torch.equal(kv_cache, cache_before)
        return out
