"""Float64 oracle for paged varlen attention (ch.4 §4; §11.6's causal rule for chunks).

Deliberately naive and independent of the backends: a Python loop over tokens for the cache write,
a loop over requests that reads every position through the block table, an explicit bottom-right mask
and a float64 softmax. Only for tests.
"""

from __future__ import annotations

import torch

from minivllm.attention.metadata import AttentionMetadata


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    kv_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(out [T, Hq, D] float64, cache_after_write float64)``; the input cache is not modified."""
    cache = kv_cache.detach().to("cpu", torch.float64).clone()
    block_size = cache.shape[2]
    k64, v64 = k.detach().to("cpu", torch.float64), v.detach().to("cpu", torch.float64)
    for t, slot in enumerate(meta.slot_mapping.cpu().tolist()[: k.shape[0]]):
        if slot >= 0:
            cache[0, slot // block_size, slot % block_size] = k64[t]
            cache[1, slot // block_size, slot % block_size] = v64[t]

    flat = cache.view(2, -1, cache.shape[3], cache.shape[4])  # [2, num_blocks * block_size, Hkv, D]
    q64 = q.detach().to("cpu", torch.float64)
    table = meta.block_table.cpu().tolist()
    qsl = meta.query_start_loc.cpu().tolist()
    num_heads, num_kv_heads = q.shape[1], cache.shape[3]
    group = num_heads // num_kv_heads
    out = torch.zeros_like(q64)
    for r, seq_len in enumerate(meta.seq_lens.cpu().tolist()):
        start, end = qsl[r], qsl[r + 1]
        q_len = end - start
        read = [table[r][j // block_size] * block_size + j % block_size for j in range(seq_len)]
        keys = flat[0, read]  # [L, Hkv, D], read position by position through the block table
        vals = flat[1, read]
        keys = keys.repeat_interleave(group, dim=1)  # [L, Hq, D]: query head h uses KV head h // group
        vals = vals.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q64[start:end], keys) * scale
        query_pos = torch.arange(q_len) + (seq_len - q_len)  # absolute position of each query row
        allowed = torch.arange(seq_len)[None, :] <= query_pos[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
        out[start:end] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vals)
    return out, cache
