"""CPU linear layers through oneDNN with each weight packed once (§11.9, where the CPU time goes).

On a CPU almost all of a step's time is matrix multiplication (the profile in
``python -m minivllm.lab.benchmarks.throughput --profile``). PyTorch's default CPU GEMM re-reads the
weight in its plain ``[out, in]`` layout on every call, which is slow for the small batches of a
decode step (16 rows: a third of the machine's speed). oneDNN can reorder a weight once into the
blocked layout its kernels want; every later call then streams it at close to full speed. vLLM's
CPU path does the same at load time (``dispatch_cpu_unquantized_gemm`` in
``vllm/model_executor/layers/utils.py``, releases after 0.8.5).

The arithmetic is still fp32 (or bf16) multiply-add; only the summation order differs from
PyTorch's default GEMM, by a few units in the last place, like any other GEMM library.

``set_cpu_gemm(model, "onednn")`` swaps every ``nn.Linear`` for a :class:`PackedLinear` that shares
its weight and bias (tied embeddings stay tied); ``set_cpu_gemm(model, "torch")`` swaps them back.
The packed copy costs as much memory as the weights themselves; where the decode GEMM kernel runs
(:mod:`minivllm.model.cpu_decode_gemm`, for calls of at most 16 rows), its own packed copy costs as much again.

oneDNN compiles a kernel for every input shape it meets and keeps up to 1,024 of them (its primitive
cache): a server whose steps have every token count from 1 to the budget would fill it, a few hundred MB
for SmolLM2 (the README's soak section has the RSS growth it caused). So the number of rows is rounded up to a multiple
of ``ROW_BUCKET`` with zero rows, whose outputs are dropped: a few dozen shapes in all. Inside a call of one
shape a row's result does not depend on what the other rows hold, so the zero rows change no bit of the real
ones (checked in the tests). A call of another shape may take another kernel and differ in the last bits (on an
AVX-512 EPYC a one-row call does), as any change of GEMM shape may: the tests compare those within fp32 rounding.
"""

from __future__ import annotations

import functools
import platform

import torch
from torch import nn

from minivllm.config import CPU_GEMMS
from minivllm.cpp_build import kernel_mode
from minivllm.model import cpu_decode_gemm

ROW_BUCKET = 8  # PackedLinear pads its input to a multiple of this many rows


@functools.cache
def onednn_supports(dtype: torch.dtype) -> bool:
    """Whether this PyTorch build and CPU can run a packed oneDNN linear in ``dtype`` (tried once)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ones(16, 16, dtype=dtype)
        y = torch.ops.mkldnn._linear_pointwise(torch.ones(2, 16, dtype=dtype), _pack(w), None, "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return bool((y == 16).all())


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` reordered once for oneDNN; ``weight``/``bias`` are the original parameters.

    Where the decode GEMM kernel runs (:mod:`minivllm.model.cpu_decode_gemm`: fp32, built), calls of at most
    ``DECODE_ROWS`` rows (decode steps) go to it instead, over a second packed copy of the weight."""

    decode_weight: torch.Tensor | None  # the decode kernel's packing, or None
    decode_linear: cpu_decode_gemm.DecodeLinear | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # the same Parameter: loading, tying and .to() still see it
        self.bias = linear.bias
        self.register_buffer("packed_weight", _pack(linear.weight), persistent=False)
        self.decode_linear = None
        self.register_buffer("decode_weight", None, persistent=False)
        self.pack_decode()

    def pack_decode(self) -> None:
        """Pack the weight for the decode kernel too, where it runs (``MINIVLLM_CPU_DECODE_KERNEL``, fp32)."""
        kernel = cpu_decode_gemm.get_decode_linear(kernel_mode()) if cpu_decode_gemm.supports(self.weight) else None
        self.decode_linear = kernel
        self.decode_weight = None if kernel is None else cpu_decode_gemm.pack(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if self.decode_linear is not None and x.dim() == 2 and rows <= cpu_decode_gemm.DECODE_ROWS:
            y = x.new_empty(rows, self.out_features)  # a decode step: the weights streamed once, at full speed
            self.decode_linear(x.contiguous(), self.decode_weight, self.bias, y)
            return y
        pad = -rows % ROW_BUCKET if x.dim() == 2 else 0
        if pad:  # a bucketed row count: oneDNN compiles and caches one kernel per input shape
            x = torch.cat([x, x.new_zeros(pad, x.shape[1])])
        y = torch.ops.mkldnn._linear_pointwise.default(x, self.packed_weight, self.bias, "none", [], "")
        return y[:rows] if pad else y

    def unpacked(self) -> nn.Linear:
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        linear.weight, linear.bias = self.weight, self.bias
        return linear


def resolve_cpu_gemm(cpu_gemm: str, device: torch.device, dtype: torch.dtype) -> str:
    """``auto`` -> ``onednn`` on a CPU that supports it in ``dtype``, else ``torch``; CUDA is always ``torch``."""
    if cpu_gemm not in CPU_GEMMS:
        raise ValueError(f"cpu_gemm must be one of {CPU_GEMMS}, got {cpu_gemm!r}")
    if device.type != "cpu":
        return "torch"
    if cpu_gemm == "onednn" and not onednn_supports(dtype):
        raise ValueError(
            f"cpu_gemm='onednn' needs an x86 CPU and a PyTorch build with oneDNN that supports {dtype}; "
            "use cpu_gemm='torch' or 'auto'."
        )
    if cpu_gemm == "auto":
        return "onednn" if onednn_supports(dtype) else "torch"
    return cpu_gemm


def set_cpu_gemm(model: nn.Module, gemm: str) -> int:
    """Swap every linear layer of ``model`` to ``gemm`` ("onednn" or "torch"); return how many changed.

    "onednn" also re-packs layers that are packed already, so weights loaded since are picked up.
    """
    changed = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if gemm == "onednn" and type(child) is nn.Linear:
                setattr(parent, name, PackedLinear(child))
            elif gemm == "onednn" and isinstance(child, PackedLinear):
                child.packed_weight = _pack(child.weight)
                child.pack_decode()
            elif gemm == "torch" and isinstance(child, PackedLinear):
                setattr(parent, name, child.unpacked())
            else:
                continue
            changed += 1
    return changed
