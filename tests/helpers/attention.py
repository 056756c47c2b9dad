"""Random paged attention batches with permuted physical blocks, and their reference output."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from minivllm.attention.metadata import AttentionMetadata, build_attention_metadata
from minivllm.attention.reference import reference_attention


@dataclass
class Case:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    kv_cache: torch.Tensor
    meta: AttentionMetadata
    scale: float

    def reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        return reference_attention(self.q, self.k, self.v, self.kv_cache, self.meta, self.scale)

    def run(self, backend) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a backend on a copy of the cache; return (output, cache after the call)."""
        cache = self.kv_cache.clone()
        return backend.forward(self.q, self.k, self.v, cache, self.meta, self.scale), cache


def make_case(
    reqs: list[tuple[int, int]],
    block_size: int,
    heads: tuple[int, int] = (9, 3),
    head_dim: int = 64,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    seed: int = 0,
    junk: int = 2,
    pad: int = 0,
) -> Case:
    """``reqs`` = [(num_computed, num_scheduled)]. Physical blocks are a random permutation; every block
    table gets ``junk`` extra (valid-looking) block ids after the needed ones; ``pad`` padding tokens."""
    gen = torch.Generator().manual_seed(seed)
    needed = [-(-(c + n) // block_size) for c, n in reqs]
    num_blocks = sum(needed) + 3
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    block_ids, at = [], 0
    for r, need in enumerate(needed):
        block_ids.append(perm[at : at + need] + perm[: junk * (r % 2)] + perm[-junk:])
        at += need
    meta = build_attention_metadata(
        [c for c, _ in reqs], [n for _, n in reqs], block_ids, block_size, device, pad_to=sum(n for _, n in reqs) + pad
    )
    num_heads, num_kv_heads = heads
    rows = meta.slot_mapping.shape[0]

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)

    return Case(
        q=randn(rows, num_heads, head_dim),
        k=randn(rows, num_kv_heads, head_dim),
        v=randn(rows, num_kv_heads, head_dim),
        kv_cache=randn(2, num_blocks, block_size, num_kv_heads, head_dim),
        meta=meta,
        scale=head_dim**-0.5,
    )


def mixed_requests(seed: int, block_size: int, max_ctx: int = 60) -> list[tuple[int, int]]:
    """A shuffled mixed batch: L=1, decodes on and one past a page boundary, a fresh prefill, chunks."""
    rng = random.Random(seed)
    b = block_size
    reqs = [
        (0, 1),  # very first token: L = 1
        (2 * b - 1, 1),  # decode with L exactly on a page boundary
        (2 * b, 1),  # decode one past it
        (0, rng.randint(2, 9)),  # small fresh prefill
        (b, b),  # chunk ending on a boundary
        (b + 1, b),  # chunk ending one past
        (rng.randint(1, max_ctx), rng.randint(2, 24)),  # random chunk after context
        (rng.randint(1, max_ctx), 1),  # random decode
    ]
    rng.shuffle(reqs)
    return reqs
