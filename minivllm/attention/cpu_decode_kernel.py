"""An optional C++ paged decode-attention kernel for the CPU (ch.4 §4 paged attention; §11.7 decode steps).

A decode step's attention on a CPU is memory-bound: every request reads its whole K/V context once. The torch
path (:mod:`minivllm.attention.torch_backend`) first gathers the context out of the pages into a padded
``[B, Hkv, max L, D]`` block and then calls SDPA over it, so it moves the keys twice and attends to padding.
This kernel reads each key and value row once, straight from the pages through the block table, as vLLM's CPU
backend does with its own C++ kernel (``paged_attention_v1`` in ``csrc/cpu/attention.cpp``, releases up to
0.8.5; later ones use ``csrc/cpu/cpu_attn*``). Per decode request, in parallel over torch's threads (longest
requests first, each thread taking the next one when it is free, so unequal lengths still share the work out):

1. scores ``s[h, j] = scale * q_h . k_j`` for every query head ``h`` and visible position ``j < seq_len``; a
   page holds ``[block_size, Hkv, D]`` contiguously, so it is read front to back, and each key row serves the
   ``Hq / Hkv`` query heads that share it (GQA) while the next page is prefetched;
2. a softmax per query head, all in fp32: the max first, then ``exp`` 16 lanes at a time (Cody-Waite range
   reduction and Cephes' polynomial, within ~2 ulp of the exact value: a libm ``exp`` per score cost as much as
   the rest of the kernel), summed in 16 fixed lanes;
3. ``out_h = sum_j p[h, j] v_j / sum_j p[h, j]``, accumulated in fp32, written in the model dtype.

The scores of a request stay in an ``[Hq, seq_len]`` fp32 buffer, so the max is known before any ``exp`` (two
passes rather than FlashAttention's online rescaling: at decode sizes the buffer fits in the L2 cache).
The cache may be fp32, bf16 or fp16 (q, cache and out share one dtype); the head size is one of ``HEAD_DIMS``,
a compile-time constant of the loops. One request is computed by one thread, and its sums run in 16 fixed lanes
(GCC/Clang vector extensions) without FMA contraction, so its result depends neither on the thread count nor on
the vector width the CPU picked (AVX-512, AVX2 or SSE builds of the same code). It may differ from SDPA's in
the last bits: ``tests/attention/test_cpu_paged_decode.py`` compares the two within fp32 rounding.

Like the decode-sized linear layer's kernel (:mod:`minivllm.model.cpu_decode_gemm`), it is compiled at first use
by :mod:`minivllm.cpp_build`, whose ``MINIVLLM_CPU_DECODE_KERNEL`` (``auto``, ``1`` or ``0``) chooses for both; the
torch path is this kernel's test oracle and its fallback.
"""

from __future__ import annotations

import functools
import logging
import platform
from collections.abc import Callable

import torch

from minivllm.cpp_build import ENV_VALUES, ENV_VAR, compile_inline, kernel_mode

__all__ = [  # ENV_VAR, ENV_VALUES and kernel_mode live in minivllm.cpp_build (shared with the linear kernel)
    "ENV_VALUES",
    "ENV_VAR",
    "HEAD_DIMS",
    "kernel_mode",
    "supports",
    "unavailable",
    "get_paged_decode",
    "get_reshape_and_cache",
]

logger = logging.getLogger(__name__)

HEAD_DIMS = (64, 128)  # head sizes the kernel is compiled for (SmolLM2, TinyLlama, Llama; others: the torch path)

_CPP = r"""
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>
#include <atomic>
#include <numeric>
#include <cstring>
#include <cstdint>

// One build runs the hot loop at the widest vector width the CPU has (GCC/Clang function multiversioning):
// the sums are in 16 fixed lanes (v16 below) and contraction into FMA is off, so every version does the same
// arithmetic.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define MINIVLLM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MINIVLLM_CLONES
#endif

namespace {

template <typename scalar_t>
struct Args {
  const scalar_t* q;  // [T, Hq, D] rows at q_row, heads at q_head
  const scalar_t* k;  // the K pages, [num_blocks, block_size, Hkv, D]
  const scalar_t* v;  // the V pages, same layout
  scalar_t* out;      // [T, Hq, D] rows at out_row, heads at out_head
  const int64_t *rows, *reqs;
  const int32_t *table, *lens;
  int64_t q_row, q_head, out_row, out_head, table_row, block_size, num_kv_heads, head_dim, group;
  float scale;
};

// GCC/Clang vector extensions: a v16 is 16 fp32 lanes, lowered to one AVX-512 register, two AVX2 or four SSE
// ones; each lane's arithmetic is the same at every width, so the bits are too. Arithmetic on whole vectors
// keeps a dot product's 16 partial sums and an output head's accumulator in registers (plain loops over
// arrays kept them on the stack, and every dot product waited on the previous one's stores).
typedef float v16 __attribute__((vector_size(64), aligned(4)));  // aligned(4): std::vector storage is not 64-aligned
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
typedef float v2 __attribute__((vector_size(8)));

inline __attribute__((always_inline)) v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The halves of a vector (memcpy: GCC and Clang turn it into a register extract; no shuffle builtin needed).
template <typename Half, typename Whole>
inline __attribute__((always_inline)) Half half(const Whole& x, int which) {
  Half h;
  std::memcpy(&h, reinterpret_cast<const char*>(&x) + which * sizeof h, sizeof h);
  return h;
}

// The sum of a v16's lanes by the tree acc[l] += acc[l + w] for w = 8, 4, 2, 1, in registers.
inline __attribute__((always_inline)) float hsum(v16 x) {
  const v8 a = half<v8>(x, 0) + half<v8>(x, 1);
  const v4 b = half<v4>(a, 0) + half<v4>(a, 1);
  const v2 c = half<v2>(b, 0) + half<v2>(b, 1);
  return c[0] + c[1];
}

// q . k over NC chunks of 16 lanes: lane l sums the products of dims l, l + 16, ... in order, then hsum
template <int NC>
inline __attribute__((always_inline)) float dot(const v16* q, const float* k) {
  v16 acc = {};
  for (int c = 0; c < NC; ++c) acc += q[c] * load16(k + 16 * c);
  return hsum(acc);
}

typedef int32_t vi16 __attribute__((vector_size(64), aligned(4)));

// exp(x) of 16 lanes, x <= 0 (softmax numerators): x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, then
// Cephes' degree-6 polynomial for e^r (within ~2 ulp of the exact value) times 2^n. Elementwise vector arithmetic,
// no libm call: the same bits at every vector width. Below -87 the result is held at e^-87 (~1.6e-38).
inline __attribute__((always_inline)) v16 exp_nonpos(v16 x) {
  const v16 lo = x - x - 87.f, magic = x - x + 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x < lo ? lo : x;
  const v16 n = (x * 1.44269504088896341f + magic) - magic;
  const v16 r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  v16 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  const vi16 bits = (__builtin_convertvector(n, vi16) + 127) << 23;
  v16 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

template <typename scalar_t>
inline __attribute__((always_inline)) void prefetch(const scalar_t* p, int64_t n) {
  for (int64_t i = 0; i < n * static_cast<int64_t>(sizeof(scalar_t)); i += 64)
    __builtin_prefetch(reinterpret_cast<const char*>(p) + i);
}

// visit(j, rows) for every visible position j, page by page: rows = its [Hkv, D] keys (or values), contiguous.
// A page is one contiguous [block_size, Hkv, D] block at a random place: while position i of a page is used,
// position i of the next page is prefetched (the hardware prefetcher stops at the page's end).
template <typename scalar_t, typename Visit>
inline __attribute__((always_inline)) void for_each_position(const Args<scalar_t>& a, const scalar_t* base,
                                                             const int32_t* table, int64_t len, Visit&& visit) {
  const int64_t stride = a.num_kv_heads * a.head_dim, page = a.block_size * stride;
  for (int64_t first = 0; first < len; first += a.block_size) {
    const int64_t blk = first / a.block_size, n = std::min(a.block_size, len - first);
    const int64_t next_n = std::min(a.block_size, len - first - a.block_size);  // <= 0 on the last page
    const scalar_t* rows = base + table[blk] * page;
    const scalar_t* next = next_n > 0 ? base + table[blk + 1] * page : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      if (i < next_n) prefetch(next + i * stride, stride);
      visit(first + i, rows + i * stride);
    }
  }
}

// One head's D values of a key or value row as fp32: the row itself in an fp32 cache, else converted into buf.
template <int64_t D, typename scalar_t>
inline __attribute__((always_inline)) const float* as_float(const scalar_t* row, float* buf) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return row;
  } else {
    for (int64_t d = 0; d < D; ++d) buf[d] = static_cast<float>(row[d]);
    return buf;
  }
}

// Tasks [begin, end): one decode request each, every head. Scores s[(h * G + g) * padded + j] for query head h*G+g.
// NC = head_dim / 16 is a compile-time constant, so a query head and its output accumulator live in registers.
template <typename scalar_t, int NC>
inline __attribute__((always_inline)) void attend(const Args<scalar_t>& a, int64_t begin, int64_t end) {
  constexpr int64_t D = 16 * NC;
  const int64_t Hkv = a.num_kv_heads, Hq = Hkv * a.group, G = a.group;
  std::vector<v16> qf(Hq * NC), acc(Hq * NC);
  std::vector<float> total(Hq), scores;
  float x[D];
  for (int64_t b = begin; b < end; ++b) {
    const int64_t r = a.reqs[b], len = a.lens[r], padded = (len + 15) / 16 * 16;
    const int32_t* table = a.table + r * a.table_row;
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t d = 0; d < D; ++d)
        qf[h * NC + d / 16][d % 16] = static_cast<float>(a.q[a.rows[b] * a.q_row + h * a.q_head + d]);
    scores.resize(Hq * padded);
    float* s = scores.data();
    for_each_position(a, a.k, table, len, [&](int64_t j, const scalar_t* keys) {  // 1: scores
      for (int64_t h = 0; h < Hkv; ++h) {  // each key row is read once for its group of query heads (GQA)
        const float* kr = as_float<D>(keys + h * D, x);
        for (int64_t g = 0; g < G; ++g) s[(h * G + g) * padded + j] = dot<NC>(&qf[(h * G + g) * NC], kr) * a.scale;
      }
    });
    for (int64_t h = 0; h < Hq; ++h) {  // 2: softmax numerators, max first; 16 lanes at a time
      float* sh = s + h * padded;
      for (int64_t j = len; j < padded; ++j) sh[j] = sh[0];  // the tail of the last 16: exp'd, then zeroed
      v16 mv = load16(sh);
      for (int64_t j = 16; j < padded; j += 16) {
        const v16 c = load16(sh + j);
        mv = mv < c ? c : mv;
      }
      float m = mv[0];
      for (int l = 1; l < 16; ++l) m = std::max(m, mv[l]);
      v16 sum = {};
      for (int64_t j = 0; j < padded; j += 16) {
        v16 e = exp_nonpos(load16(sh + j) - m);
        if (j + 16 > len)
          for (int64_t l = len - j; l < 16; ++l) e[l] = 0.f;
        std::memcpy(sh + j, &e, sizeof e);
        sum += e;
      }
      total[h] = hsum(sum);
    }
    std::fill(acc.begin(), acc.end(), v16{});
    v16* y = acc.data();
    for_each_position(a, a.v, table, len, [&](int64_t j, const scalar_t* values) {  // 3: weighted values
      for (int64_t h = 0; h < Hkv; ++h) {
        const float* vr = as_float<D>(values + h * D, x);
        v16 vc[NC];
        for (int c = 0; c < NC; ++c) vc[c] = load16(vr + 16 * c);
        for (int64_t g = 0; g < G; ++g) {
          const float p = s[(h * G + g) * padded + j];
          for (int c = 0; c < NC; ++c) y[(h * G + g) * NC + c] += p * vc[c];
        }
      }
    });
    for (int64_t h = 0; h < Hq; ++h) {
      scalar_t* o = a.out + a.rows[b] * a.out_row + h * a.out_head;
      for (int64_t d = 0; d < D; ++d) o[d] = static_cast<scalar_t>(y[h * NC + d / 16][d % 16] / total[h]);
    }
  }
}

template <typename scalar_t>
inline __attribute__((always_inline)) void attend_any(const Args<scalar_t>& a, int64_t begin, int64_t end) {
  if (a.head_dim == 64) return attend<scalar_t, 4>(a, begin, end);  // HEAD_DIMS (Python); paged_decode checks
  attend<scalar_t, 8>(a, begin, end);
}

MINIVLLM_CLONES void attend_f32(const Args<float>& a, int64_t begin, int64_t end) { attend_any(a, begin, end); }
MINIVLLM_CLONES void attend_bf16(const Args<at::BFloat16>& a, int64_t begin, int64_t end) { attend_any(a, begin, end); }
MINIVLLM_CLONES void attend_f16(const Args<at::Half>& a, int64_t begin, int64_t end) { attend_any(a, begin, end); }

template <typename scalar_t>
void run(const Args<scalar_t>& a, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<scalar_t, float>) attend_f32(a, begin, end);
  else if constexpr (std::is_same_v<scalar_t, at::BFloat16>) attend_bf16(a, begin, end);
  else attend_f16(a, begin, end);
}
}  // namespace

void paged_decode(const at::Tensor& q, const at::Tensor& kv_cache, const at::Tensor& out, const at::Tensor& rows,
                  const at::Tensor& reqs, const at::Tensor& block_table, const at::Tensor& seq_lens, double scale) {
  TORCH_CHECK(kv_cache.is_contiguous() && kv_cache.dim() == 5, "kv_cache layout");
  const int64_t hd = kv_cache.size(4);
  TORCH_CHECK(hd == 64 || hd == 128, "paged_decode takes head_dim 64 or 128, got ", hd);
  TORCH_CHECK(q.scalar_type() == kv_cache.scalar_type() && out.scalar_type() == q.scalar_type(), "one dtype");
  TORCH_CHECK(q.stride(2) == 1 && out.stride(2) == 1 && q.size(1) % kv_cache.size(3) == 0, "q/out layout");
  TORCH_CHECK(block_table.scalar_type() == at::kInt && block_table.stride(1) == 1, "block_table int32");
  TORCH_CHECK(seq_lens.scalar_type() == at::kInt && seq_lens.is_contiguous(), "seq_lens int32");
  TORCH_CHECK(rows.scalar_type() == at::kLong && reqs.scalar_type() == at::kLong, "rows/reqs int64");
  TORCH_CHECK(rows.is_contiguous() && reqs.is_contiguous() && rows.size(0) == reqs.size(0), "rows/reqs");
  auto launch = [&](auto zero) {
    using scalar_t = decltype(zero);
    const scalar_t* k = kv_cache.data_ptr<scalar_t>();
    const Args<scalar_t> a{q.data_ptr<scalar_t>(), k, k + kv_cache[0].numel(), out.data_ptr<scalar_t>(),
                           rows.data_ptr<int64_t>(), reqs.data_ptr<int64_t>(), block_table.data_ptr<int32_t>(),
                           seq_lens.data_ptr<int32_t>(), q.stride(0), q.stride(1), out.stride(0), out.stride(1),
                           block_table.stride(0), kv_cache.size(2), kv_cache.size(3), kv_cache.size(4),
                           q.size(1) / kv_cache.size(3), static_cast<float>(scale)};
    // Longest requests first, handed out one at a time: both threads finish together however lengths vary.
    const int64_t n = rows.size(0);
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return a.lens[a.reqs[x]] > a.lens[a.reqs[y]]; });
    std::atomic<int64_t> next{0};
    at::parallel_for(0, std::min<int64_t>(at::get_num_threads(), n), 1, [&](int64_t, int64_t) {
      for (int64_t i = next++; i < n; i = next++) run(a, order[i], order[i] + 1);
    });
  };
  switch (q.scalar_type()) {
    case at::kFloat: return launch(float{});
    case at::kBFloat16: return launch(at::BFloat16{});
    case at::kHalf: return launch(at::Half{});
    default: TORCH_CHECK(false, "paged_decode takes float32, bfloat16 or float16, got ", q.scalar_type());
  }
}

// vLLM's reshape_and_cache: row t of key / value ([T, Hkv, D], rows at any stride) into slot slot_mapping[t] of the
// K / V pages; slot -1 skips the row. One call instead of the torch path's masked index_copy pair per layer.
void reshape_and_cache(const at::Tensor& key, const at::Tensor& value, const at::Tensor& kv_cache,
                       const at::Tensor& slot_mapping) {
  TORCH_CHECK(kv_cache.is_contiguous() && kv_cache.dim() == 5, "kv_cache layout");
  TORCH_CHECK(key.scalar_type() == kv_cache.scalar_type() && value.scalar_type() == kv_cache.scalar_type(), "dtype");
  TORCH_CHECK(slot_mapping.scalar_type() == at::kLong && slot_mapping.is_contiguous(), "slot_mapping int64");
  const int64_t T = key.size(0), row = kv_cache.size(3) * kv_cache.size(4);
  const int64_t num_slots = kv_cache.size(1) * kv_cache.size(2), size = row * kv_cache.element_size();
  for (const at::Tensor* x : {&key, &value})
    TORCH_CHECK(x->dim() == 3 && x->size(0) == T && x->size(1) == kv_cache.size(3) && x->size(2) == kv_cache.size(4) &&
                    x->stride(2) == 1 &&
                    x->stride(1) == x->size(2) && slot_mapping.size(0) >= T, "key/value [T, Hkv, D]");
  const int64_t* slots = slot_mapping.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t) TORCH_CHECK(slots[t] >= -1 && slots[t] < num_slots, "slot out of range");
  char* k_pages = static_cast<char*>(kv_cache.data_ptr());
  char* v_pages = k_pages + num_slots * size;
  const char *k = static_cast<const char*>(key.data_ptr()), *v = static_cast<const char*>(value.data_ptr());
  const int64_t ks = key.stride(0) * key.element_size(), vs = value.stride(0) * value.element_size();
  at::parallel_for(0, T, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (slots[t] < 0) continue;
      std::memcpy(k_pages + slots[t] * size, k + t * ks, size);
      std::memcpy(v_pages + slots[t] * size, v + t * vs, size);
    }
  });
}

TORCH_LIBRARY(minivllm_cpu, m) {
  m.def("paged_decode(Tensor q, Tensor kv_cache, Tensor(a!) out, Tensor rows, Tensor reqs, Tensor block_table, "
        "Tensor seq_lens, float scale) -> ()");
  m.def("reshape_and_cache(Tensor key, Tensor value, Tensor(a!) kv_cache, Tensor slot_mapping) -> ()");
}
TORCH_LIBRARY_IMPL(minivllm_cpu, CPU, m) {
  m.impl("paged_decode", &paged_decode);
  m.impl("reshape_and_cache", &reshape_and_cache);
}
"""

PagedDecode = Callable[..., None]


def supports(q: torch.Tensor, kv_cache: torch.Tensor) -> bool:
    """Whether the kernel handles these shapes and dtypes (CPU tensors, one float dtype, a head size in HEAD_DIMS)."""
    return (
        q.device.type == "cpu"
        and kv_cache.device.type == "cpu"
        and q.dtype == kv_cache.dtype
        and q.dtype in (torch.float32, torch.bfloat16, torch.float16)
        and kv_cache.shape[-1] in HEAD_DIMS
        and kv_cache.is_contiguous()
    )


@functools.cache
def _build() -> PagedDecode:
    """Compile (or load the cached build of) the extension; raises what the build raises."""
    compile_inline("minivllm_cpu_paged_decode", _CPP)  # registers torch.ops.minivllm_cpu.paged_decode
    return torch.ops.minivllm_cpu.paged_decode


@functools.cache
def _load_or_none() -> PagedDecode | None:
    try:
        return _build()
    except Exception as e:  # no compiler, headers or ninja: every reason means "use the torch path"
        reason = " ".join(str(e).split())[:300]
        logger.warning("CPU decode kernel unavailable, using the torch path (%s=0 hides this): %s", ENV_VAR, reason)
        return None


def unavailable(mode: str) -> bool:
    """True when ``get_paged_decode(mode)`` is known to give None: ``0``; ``auto`` off Linux or after a failed build."""
    if mode == "auto" and platform.system() != "Linux":
        return True
    return mode == "0" or (mode == "auto" and _load_or_none.cache_info().currsize > 0 and _load_or_none() is None)


def get_reshape_and_cache(mode: str) -> PagedDecode | None:
    """The extension's K/V writer (vLLM's ``reshape_and_cache``), built with the kernel; None where it is not."""
    return None if get_paged_decode(mode) is None else torch.ops.minivllm_cpu.reshape_and_cache


def get_paged_decode(mode: str) -> PagedDecode | None:
    """The compiled kernel in mode ``auto``/``1`` (built at the first call), or None for the torch path."""
    if unavailable(mode):
        return None
    if mode == "1":
        try:
            return _build()
        except Exception as e:
            raise RuntimeError(f"{ENV_VAR}=1 but the CPU decode kernel could not be built: {e}") from e
    return _load_or_none()
