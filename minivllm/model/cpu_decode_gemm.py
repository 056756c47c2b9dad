"""An optional C++ kernel for a decode step's linear layers on a CPU (§11.7: a decode step streams every weight).

A decode step multiplies a few rows (one per running request) by every weight matrix: 16 rows of SmolLM2 make
4.3 GFLOP over 538 MB of fp32 weights, so the step is as fast as the weights stream from memory. oneDNN's packed
GEMM (:mod:`minivllm.model.cpu_gemm`) computes fast but reads the weights at about half the machine's bandwidth
at that size; this kernel is written for it, as vLLM's CPU backend has its own small-batch GEMM paths
(``csrc/cpu``). The weight ``W [N, K]`` is packed once into ``[ceil(N/16), K, 16]``: sixteen output columns side by
side, so one block of columns is one contiguous stream read front to back (and prefetched 4 KB ahead). For each
block, every input row ``m`` keeps a 16-lane accumulator in a register and, for ``k = 0 .. K-1`` in order, adds
``x[m, k] * W[n0:n0+16, k]`` (a fused multiply-add); the bias is added at the end. Blocks are shared out over
torch's threads.

Each output is one FMA chain over ``k`` in order, computed by one thread, so its bits depend neither on the
thread count, nor on the other rows of the call (a one-row call and a sixteen-row call give the same row), nor
on the vector width (AVX-512 or AVX2 builds of the same code; an x86-64 without FMA, from before 2013, runs the
``default`` build with separate multiply and add). They differ from oneDNN's and HF's GEMMs in the last bits, as
those differ from each other: ``tests/model/test_cpu_decode_gemm.py`` compares with a float64 product.

Used for fp32 calls of at most ``DECODE_ROWS`` rows (decode steps); larger ones (prompts) stay on oneDNN, which is
compute-bound there. The packed copy costs as much memory as the weights (538 MB for SmolLM2 in fp32). Built and
chosen by :mod:`minivllm.cpp_build` (``MINIVLLM_CPU_DECODE_KERNEL``), with the decode attention kernel.
"""

from __future__ import annotations

import functools
import logging
import platform
from collections.abc import Callable

import torch

from minivllm.cpp_build import ENV_VAR, compile_inline

logger = logging.getLogger(__name__)

DECODE_ROWS = 16  # calls of at most this many rows use the kernel
BLOCK = 16  # output columns per packed block (one AVX-512 register of fp32)

_CPP = r"""
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <cstdint>
#include <cstring>
#include <optional>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define MINIVLLM_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define MINIVLLM_CLONES
#endif

namespace {

// 16 fp32 lanes: one AVX-512 register, two AVX2 ones; lane l holds output column n0 + l.
typedef float v16 __attribute__((vector_size(64), aligned(4)));

inline __attribute__((always_inline)) v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Rows [0, M) of x (row stride K) times one packed block w ([K, 16]) into columns n0 .. n0 + cnt - 1 of y.
// The M accumulators stay in registers; x[m, k] is broadcast from memory into each multiply-add.
template <int M>
inline __attribute__((always_inline)) void tile(const float* x, const float* w, const float* bias, float* y,
                                                int64_t K, int64_t N, int64_t n0, int64_t cnt, bool prefetch) {
  v16 acc[M];
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) acc[m] = v16{};
  for (int64_t k = 0; k < K; ++k) {
    if (prefetch) __builtin_prefetch(w + (k + 64) * 16, 0, 3);  // 4 KB ahead in the block's stream
    const v16 wk = load16(w + k * 16);
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) acc[m] += x[m * K + k] * wk;
  }
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) {
    float out[16];
    std::memcpy(out, &acc[m], sizeof out);
    for (int64_t l = 0; l < cnt; ++l) y[m * N + n0 + l] = bias ? out[l] + bias[n0 + l] : out[l];
  }
}

// Blocks [b0, b1) for every row: tiles of 16, 8, 4, 2 and 1 rows (a row's arithmetic is the same in each).
// FMA contraction is on here (the file is built with it off): acc + x * w is one rounding, at every width.
MINIVLLM_CLONES __attribute__((optimize("fp-contract=fast"))) void blocks(
    const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t K, int64_t N, int64_t b0,
    int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const float* wb = w + b * K * 16;
    const int64_t n0 = b * 16, cnt = N - n0 < 16 ? N - n0 : 16;
    int64_t m = 0;
    for (; M - m >= 16; m += 16) tile<16>(x + m * K, wb, bias, y + m * N, K, N, n0, cnt, m == 0);
    if (M - m >= 8) { tile<8>(x + m * K, wb, bias, y + m * N, K, N, n0, cnt, m == 0); m += 8; }
    if (M - m >= 4) { tile<4>(x + m * K, wb, bias, y + m * N, K, N, n0, cnt, m == 0); m += 4; }
    if (M - m >= 2) { tile<2>(x + m * K, wb, bias, y + m * N, K, N, n0, cnt, m == 0); m += 2; }
    if (M - m >= 1) tile<1>(x + m * K, wb, bias, y + m * N, K, N, n0, cnt, m == 0);
  }
}
}  // namespace

// out [M, N] = x [M, K] @ W^T (+ bias), W packed as [ceil(N / 16), K, 16]; fp32, contiguous.
void decode_linear(const at::Tensor& x, const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                   const at::Tensor& out) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && packed.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat,
              "decode_linear takes float32");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && out.dim() == 2 && out.is_contiguous(), "x/out [M, K]/[M, N]");
  TORCH_CHECK(packed.dim() == 3 && packed.is_contiguous() && packed.size(2) == 16, "packed [N / 16, K, 16]");
  const int64_t M = x.size(0), K = x.size(1), N = out.size(1), NB = packed.size(0);
  TORCH_CHECK(packed.size(1) == K && out.size(0) == M && (N + 15) / 16 == NB, "shapes");
  const float* b = nullptr;
  if (bias.has_value()) {
    TORCH_CHECK(bias->scalar_type() == at::kFloat && bias->is_contiguous() && bias->numel() == N, "bias [N]");
    b = bias->data_ptr<float>();
  }
  const float* xp = x.data_ptr<float>();
  const float* w = packed.data_ptr<float>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, NB, 1, [&](int64_t b0, int64_t b1) { blocks(xp, w, b, y, M, K, N, b0, b1); });
}

TORCH_LIBRARY(minivllm_cpu_gemm, m) {
  m.def("decode_linear(Tensor x, Tensor packed, Tensor? bias, Tensor(a!) out) -> ()");
}
TORCH_LIBRARY_IMPL(minivllm_cpu_gemm, CPU, m) { m.impl("decode_linear", &decode_linear); }
"""

DecodeLinear = Callable[..., None]


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``[N, K]`` -> ``[ceil(N/16), K, 16]`` fp32: block b, row k holds ``W[16b : 16b + 16, k]`` (zeros past N)."""
    n, k = weight.shape
    padded = weight.detach().new_zeros(-(-n // BLOCK) * BLOCK, k)
    padded[:n] = weight.detach()
    return padded.view(-1, BLOCK, k).transpose(1, 2).contiguous()


def supports(weight: torch.Tensor) -> bool:
    """Whether the kernel takes this weight (a CPU fp32 matrix)."""
    return weight.device.type == "cpu" and weight.dtype == torch.float32 and weight.dim() == 2


@functools.cache
def _build() -> DecodeLinear:
    """Compile (or load the cached build of) the extension; raises what the build raises."""
    compile_inline("minivllm_cpu_decode_gemm", _CPP)
    return torch.ops.minivllm_cpu_gemm.decode_linear


@functools.cache
def _load_or_none() -> DecodeLinear | None:
    try:
        return _build()
    except Exception as e:  # no compiler, headers or ninja: every reason means "use oneDNN"
        reason = " ".join(str(e).split())[:300]
        logger.warning("CPU decode GEMM unavailable, using oneDNN (%s=0 hides this): %s", ENV_VAR, reason)
        return None


def get_decode_linear(mode: str) -> DecodeLinear | None:
    """The compiled kernel in mode ``auto``/``1`` (built at the first call), or None (``0``, or ``auto`` off
    Linux or after a failed build)."""
    if mode == "0" or (mode == "auto" and platform.system() != "Linux"):
        return None
    if mode == "1":
        try:
            return _build()
        except Exception as e:
            raise RuntimeError(f"{ENV_VAR}=1 but the CPU decode GEMM could not be built: {e}") from e
    return _load_or_none()
