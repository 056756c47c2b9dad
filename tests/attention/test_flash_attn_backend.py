"""Optional upstream FlashAttention-2 backend vs the float64 oracle (CUDA + ``flash_attn`` only)."""

from __future__ import annotations

import pytest
import torch

from minivllm.attention import get_attn_backend

pytest.importorskip("flash_attn", reason="the optional 'flash_attn' package is not importable")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="flash_attn needs a CUDA device"),
]

BLOCK = 256  # upstream FA2's paged-KV rule: page size must be a multiple of 256


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads", [(9, 3), (8, 8)])
def test_flash_attn_vs_reference(case_factory, dtype, heads):
    reqs = [(300, 1), (0, 200), (BLOCK, 40), (2 * BLOCK - 1, 1), (0, 1), (700, 129)]
    case = case_factory(reqs, BLOCK, heads, 64, dtype=dtype, device="cuda", seed=9, pad=2)
    backend = get_attn_backend("flash_attn", "cuda", dtype, BLOCK, 64)
    ref_out, ref_cache = case.reference()
    out, cache = case.run(backend)
    torch.testing.assert_close(out.double().cpu(), ref_out, atol=1.5e-2, rtol=1e-2)
    torch.testing.assert_close(cache.double().cpu(), ref_cache, atol=0, rtol=0)
    out_torch, _ = case.run(get_attn_backend("torch", "cuda", dtype, BLOCK, 64))
    torch.testing.assert_close(out.float(), out_torch.float(), atol=1.5e-2, rtol=1e-2)


def test_flash_attn_rejects_small_pages():
    with pytest.raises(ValueError, match="block_size 16 is not a multiple of 256"):
        get_attn_backend("flash_attn", "cuda", torch.float16, 16, 64)
