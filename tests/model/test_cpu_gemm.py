"""Packed oneDNN linear layers (model/cpu_gemm.py): same numbers as nn.Linear, weights still shared."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minivllm.config import EngineConfig, ModelConfig
from minivllm.cpp_build import ENV_VAR
from minivllm.model.cpu_gemm import ROW_BUCKET, PackedLinear, onednn_supports, resolve_cpu_gemm, set_cpu_gemm

needs_onednn = pytest.mark.skipif(not onednn_supports(torch.float32), reason="no oneDNN fp32 linear on this CPU")


@needs_onednn
@pytest.mark.parametrize("rows", [1, 16, 300])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_matches_float64(rows, bias):
    torch.manual_seed(rows)
    linear = nn.Linear(576, 960, bias=bias)
    x = torch.randn(rows, 576)
    exact = nn.functional.linear(x.double(), linear.weight.double(), None if not bias else linear.bias.double())
    with torch.inference_mode():
        packed = PackedLinear(linear)(x)
        plain = linear(x)
    assert packed.shape == plain.shape == (rows, 960) and packed.dtype == torch.float32
    # fp32 arithmetic, another summation order: both within a few ulps of the exact result.
    assert (packed.double() - exact).abs().max() < 1e-4
    assert (plain.double() - exact).abs().max() < 1e-4


@needs_onednn
@pytest.mark.parametrize(("out_features", "in_features"), [(576, 576), (192, 576), (1536, 576), (576, 1536)])
def test_bucketed_rows_keep_their_bits_and_meet_few_shapes(monkeypatch, out_features, in_features):
    """Rows are padded to a multiple of ROW_BUCKET (oneDNN keeps one compiled kernel per shape).

    What holds on every x86-64 CPU: inside a call of one shape each row's result does not depend on what the
    other rows hold, so the zero rows added by the padding change no bit of the real rows (compared with the
    same shape padded with random rows instead); the padded result is within fp32 rounding of an unpadded call
    (a different shape may take another kernel: on an AVX-512 EPYC one row differs in the last bits); and
    1..64 rows meet only 64 / ROW_BUCKET shapes. (The decode GEMM kernel is switched off: it would take 1..16.)"""
    monkeypatch.setenv(ENV_VAR, "0")
    torch.manual_seed(out_features + in_features)
    linear = PackedLinear(nn.Linear(in_features, out_features))
    x = torch.randn(64, in_features)
    garbage = torch.randn(ROW_BUCKET, in_features) * 1e3
    op = torch.ops.mkldnn._linear_pointwise.default
    seen = set()
    real_op = torch.ops.mkldnn._linear_pointwise

    class Spy:
        @staticmethod
        def default(inp, *args):
            seen.add(tuple(inp.shape))
            return op(inp, *args)

    def call(inp):
        return op(inp, linear.packed_weight, linear.bias, "none", [], "")

    with torch.inference_mode():
        unpadded = {m: call(x[:m]) for m in range(1, 65)}
        other_pad = {m: call(torch.cat([x[:m], garbage[: -m % ROW_BUCKET]]))[:m] for m in range(1, 65)}
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", Spy)
        padded = {m: linear(x[:m]) for m in range(1, 65)}
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", real_op)
    assert all(padded[m].shape == (m, out_features) for m in padded)
    assert all(torch.equal(padded[m], other_pad[m]) for m in padded)
    assert all(torch.allclose(padded[m], unpadded[m], rtol=1e-5, atol=1e-5) for m in padded)
    assert seen == {(ROW_BUCKET * k, in_features) for k in range(1, 64 // ROW_BUCKET + 1)}


class TiedToy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = self.embed.weight


@needs_onednn
def test_set_cpu_gemm_round_trip_keeps_parameters_and_ties():
    model = TiedToy()
    params = {name: p for name, p in model.named_parameters()}
    assert set_cpu_gemm(model, "onednn") == 2
    assert isinstance(model.proj, PackedLinear) and model.head.weight is model.embed.weight
    assert {name: p for name, p in model.named_parameters()} == params  # same objects, same names
    assert "proj.packed_weight" not in model.state_dict()  # the packed copy is never saved
    x = torch.randn(3, 8)
    with torch.inference_mode():
        packed_out = model.proj(x)
    # New weights loaded in place: packing again picks them up.
    with torch.no_grad():
        model.proj.weight.mul_(2)
    assert set_cpu_gemm(model, "onednn") == 2
    with torch.inference_mode():
        assert torch.allclose(model.proj(x) - model.proj.bias, 2 * (packed_out - model.proj.bias), atol=1e-5)
    assert set_cpu_gemm(model, "torch") == 2
    assert type(model.proj) is nn.Linear and model.head.weight is model.embed.weight
    assert {name: p for name, p in model.named_parameters()} == params
    assert set_cpu_gemm(model, "torch") == 0


def test_resolve_cpu_gemm():
    assert resolve_cpu_gemm("auto", torch.device("cuda"), torch.bfloat16) == "torch"
    assert resolve_cpu_gemm("torch", torch.device("cpu"), torch.float32) == "torch"
    expected = "onednn" if onednn_supports(torch.float32) else "torch"
    assert resolve_cpu_gemm("auto", torch.device("cpu"), torch.float32) == expected
    with pytest.raises(ValueError, match="cpu_gemm must be one of"):
        resolve_cpu_gemm("mkl", torch.device("cpu"), torch.float32)


def test_bad_cpu_gemm_is_rejected_at_the_config():
    with pytest.raises(ValueError, match=r"cpu_gemm must be one of \('auto', 'onednn', 'torch'\), got 'fast'"):
        ModelConfig(cpu_gemm="fast")
    with pytest.raises(ValueError, match="cpu_gemm"):
        EngineConfig.from_kwargs(cpu_gemm=3)
