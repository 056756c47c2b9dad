"""The decode-sized linear kernel (model/cpu_decode_gemm.py): a float64 product's numbers within fp32 rounding,
bits that do not depend on the other rows or the thread count, and PackedLinear's choice between it and oneDNN."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minivllm.cpp_build import ENV_VAR
from minivllm.model import cpu_decode_gemm
from minivllm.model.cpu_gemm import PackedLinear, onednn_supports

KERNEL = cpu_decode_gemm.get_decode_linear("auto")
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="the C++ decode GEMM does not build here")


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    assert KERNEL is not None
    out = torch.empty(x.shape[0], weight.shape[0])
    KERNEL(x, cpu_decode_gemm.pack(weight), bias, out)
    return out


def test_pack_layout():
    w = torch.arange(20 * 3, dtype=torch.float32).view(20, 3)  # N = 20: a full block and 4 columns of a second
    p = cpu_decode_gemm.pack(w)
    assert p.shape == (2, 3, 16)
    assert torch.equal(p[0], w[:16].T) and torch.equal(p[1, :, :4], w[16:].T) and not p[1, :, 4:].any()


@needs_kernel
@pytest.mark.parametrize(("rows", "in_features", "out_features"), [(1, 576, 960), (16, 1536, 576), (13, 37, 100)])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_float64(rows, in_features, out_features, bias):
    torch.manual_seed(rows * 7 + in_features)
    w, x = torch.randn(out_features, in_features), torch.randn(rows, in_features)
    b = torch.randn(out_features) if bias else None
    exact = nn.functional.linear(x.double(), w.double(), None if b is None else b.double())
    got = run(x, w, b)
    # one fp32 fused multiply-add chain per output: within K * eps of the largest |x_k w_k| sum
    bound = in_features * torch.finfo(torch.float32).eps * (x.double().abs() @ w.double().abs().T).max()
    assert got.shape == (rows, out_features) and (got.double() - exact).abs().max() <= bound


@needs_kernel
def test_a_row_has_the_same_bits_alone_in_any_batch_and_on_any_thread_count():
    torch.manual_seed(3)
    w, x, b = torch.randn(200, 96), torch.randn(16, 96), torch.randn(200)
    together = run(x, w, b)
    for m in range(16):  # alone, and in every tile size (16, 8, 4, 2, 1 rows) as the last row of a call
        assert torch.equal(run(x[m : m + 1].contiguous(), w, b), together[m : m + 1])
        assert torch.equal(run(x[: m + 1].contiguous(), w, b), together[: m + 1])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(run(x, w, b), together)
    finally:
        torch.set_num_threads(threads)


@needs_kernel
@pytest.mark.skipif(not onednn_supports(torch.float32), reason="no oneDNN fp32 linear on this CPU")
def test_packed_linear_sends_decode_sized_calls_to_the_kernel(monkeypatch):
    torch.manual_seed(4)
    linear = nn.Linear(64, 48)
    packed = PackedLinear(linear)
    assert packed.decode_weight is not None and packed.decode_weight.shape == (3, 64, 16)
    calls = []

    def spy(*args):
        calls.append(args[0].shape[0])
        return KERNEL(*args)

    packed.decode_linear = spy
    with torch.inference_mode():
        for rows in (1, 16, 17, 40):
            x = torch.randn(rows, 64)
            assert torch.allclose(packed(x), linear(x), rtol=1e-5, atol=1e-5)
    assert calls == [1, 16]  # 17 and more rows (a prompt) stay on oneDNN
    monkeypatch.setenv(ENV_VAR, "0")
    assert PackedLinear(linear).decode_weight is None  # switched off: oneDNN for every call
    assert PackedLinear(nn.Linear(64, 48).to(torch.bfloat16)).decode_weight is None  # fp32 only
