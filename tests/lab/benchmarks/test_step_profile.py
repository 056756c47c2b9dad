"""Operator groups of a profiled step (benchmarks/step_profile.py)."""

from __future__ import annotations

import torch

from minivllm.lab.benchmarks.step_profile import op_breakdown


def test_ops_land_in_their_groups():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    idx = torch.arange(0, 256, 2)

    def step():
        torch.nn.functional.linear(a, b)
        torch.nn.functional.rms_norm(a, (256,))
        a.index_select(0, idx)
        torch.nn.functional.scaled_dot_product_attention(a[None, None], b[None, None], b[None, None])
        torch.sort(a)

    groups = op_breakdown(step)
    assert set(groups) == {
        "linear layers (GEMM)",
        "attention (SDPA, C++ decode kernel)",
        "KV cache gather/write",
        "elementwise (norm, RoPE, SiLU, residual)",
        "other",
    }
    assert all(ms > 0 for ms in groups.values())
