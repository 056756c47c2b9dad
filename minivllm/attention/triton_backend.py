"""One unified Triton kernel for the whole mixed prefill+decode batch (ch.4 §4 "paged attention").

Clean-room kernel after the algorithm of ``vllm/attention/ops/triton_unified_attention.py`` (2-D
path, no split-KV): decode rows, fresh prefills and continued chunks are the same code path.

* Grid ``(T // QB + R, Hkv)``: a cheap upper bound on the number of query blocks that needs no
  device-to-host copy. Request ``r`` owns the virtual block ids starting at ``qsl[r] // QB + r``; a
  program finds its request by binary search over ``query_start_loc`` and exits if it is past the
  request's last block.
* Packed GQA: one program holds ``QB`` query tokens x the ``G`` query heads sharing one KV head
  (``ROWS = QB * G`` useful rows of ``max(16, next_pow2(G))``; spare rows are masked), so every K/V
  tile is loaded once for the whole group.
* Each key position is translated to its physical slot through the block table (int64 offsets), so
  the page size is independent of the tile size. Tiles past the block's last visible position are
  skipped (causal tile skipping); inside a tile keys ``> ctx + token`` are masked (bottom-right rule).
* Online softmax in fp32 (exp2 with a pre-scaled log2(e)), guarded against rows that are still fully
  masked (``m == -inf``); the final division guards ``l == 0`` for rows that are never stored.

The KV-cache write is a Triton kernel too (one program per token, ``slot == -1`` skipped by masking),
so the backend never syncs with the host. Triton is imported lazily: importing this module does not
need it. Under ``TRITON_INTERPRET=1`` the kernels run on CPU tensors (tests); bf16 ``tl.dot`` is broken
in the interpreter, so bf16 tiles are upcast to fp32 there. fp32 on GPU uses ``input_precision="ieee"``
(no TF32) so it matches the fp32 oracle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from minivllm.attention.backend import AttentionBackend
from minivllm.attention.metadata import AttentionMetadata
from minivllm.attention.triton_utils import triton_interpreting

if TYPE_CHECKING:  # triton ships no type information: both names are Any to the type checker
    import triton.language as tl
    from triton.runtime.jit import JITFunction
else:
    tl = None  # bound to triton.language by _kernels(); the kernel bodies below read it as a global
_KERNELS: dict[bool, tuple[JITFunction, JITFunction]] = {}  # interpret mode -> (attention kernel, write kernel)


# Triton reads the kernels' parameter annotations (tl.constexpr) to specialise them: the others stay unannotated.
def _unified_attention_kernel(  # type: ignore[no-untyped-def]
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, query_start_loc_ptr, seq_lens_ptr, block_table_ptr,
    scale, num_reqs,
    stride_q_tok, stride_q_head, stride_o_tok, stride_o_head,
    stride_c_block, stride_c_slot, stride_c_head, stride_bt_req,
    GROUP: tl.constexpr, QB: tl.constexpr, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr,
    PAGE: tl.constexpr, TILE: tl.constexpr, FP32_DOT: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    kvh = tl.program_id(1)
    # Binary search: the last request whose first virtual q-block id (qsl[r] // QB + r) is <= pid.
    lo = pid * 0
    hi = lo + num_reqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first = tl.load(query_start_loc_ptr + mid) // QB + mid
        lo = tl.where(first <= pid, mid, lo)
        hi = tl.where(first <= pid, hi, mid - 1)
    r = lo
    q_start = tl.load(query_start_loc_ptr + r)
    q_len = tl.load(query_start_loc_ptr + r + 1) - q_start
    qb = pid - (q_start // QB + r)
    if qb * QB >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + r)
    ctx = seq_len - q_len  # tokens already cached before this step's chunk

    rows = tl.arange(0, ROWS)
    tok = qb * QB + rows // GROUP  # query token (within the request) of each row
    head = kvh * GROUP + rows % GROUP  # query head of each row
    row_ok = (rows < QB * GROUP) & (tok < q_len)
    d = tl.arange(0, D_PAD)
    d_ok = d < HEAD_DIM
    tok64 = (q_start + tok).to(tl.int64)
    q_tile = tl.load(
        q_ptr + tok64[:, None] * stride_q_tok + head[:, None] * stride_q_head + d[None, :],
        mask=row_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    if UPCAST:
        q_tile = q_tile.to(tl.float32)
    pos_q = ctx + tok  # absolute position of each row: it may see keys 0..pos_q
    kv_end = tl.minimum(ctx + qb * QB + QB, seq_len)  # causal tile skipping for the whole block
    bt_row = block_table_ptr + r.to(tl.int64) * stride_bt_req
    qk_scale = scale * 1.4426950408889634  # log2(e): softmax with exp2

    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, D_PAD], tl.float32)
    for t0 in range(0, kv_end, TILE):
        kpos = t0 + tl.arange(0, TILE)
        k_ok = kpos < kv_end
        page = tl.load(bt_row + kpos // PAGE, mask=k_ok, other=0).to(tl.int64)
        kv_offs = page[:, None] * stride_c_block + (kpos % PAGE)[:, None] * stride_c_slot
        kv_offs += kvh * stride_c_head + d[None, :]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k_tile = tl.load(k_cache_ptr + kv_offs, mask=kv_mask, other=0.0)
        v_tile = tl.load(v_cache_ptr + kv_offs, mask=kv_mask, other=0.0)
        if UPCAST:
            k_tile = k_tile.to(tl.float32)
            v_tile = v_tile.to(tl.float32)
        if FP32_DOT:
            s = tl.dot(q_tile, tl.trans(k_tile), input_precision="ieee")
        else:
            s = tl.dot(q_tile, tl.trans(k_tile))
        s = tl.where(k_ok[None, :] & (kpos[None, :] <= pos_q[:, None]), s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        if FP32_DOT:
            pv = tl.dot(p, v_tile, input_precision="ieee")
        else:
            pv = tl.dot(p.to(v_tile.dtype), v_tile)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(
        out_ptr + tok64[:, None] * stride_o_tok + head[:, None] * stride_o_head + d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & d_ok[None, :],
    )


def _write_kv_kernel(  # type: ignore[no-untyped-def]  # unannotated for Triton, as above
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_k_tok, stride_k_head, stride_v_tok, stride_v_head, stride_c_block, stride_c_slot, stride_c_head,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, H_PAD: tl.constexpr, D_PAD: tl.constexpr,
    PAGE: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    h = tl.arange(0, H_PAD)[:, None]
    d = tl.arange(0, D_PAD)[None, :]
    ok = tl.where(slot >= 0, (h < NUM_KV_HEADS) & (d < HEAD_DIM), False)  # slot -1 = padding: nothing stored
    dst = (slot // PAGE) * stride_c_block + (slot % PAGE) * stride_c_slot + h * stride_c_head + d
    k_row = tl.load(k_ptr + t * stride_k_tok + h * stride_k_head + d, mask=ok, other=0.0)
    v_row = tl.load(v_ptr + t * stride_v_tok + h * stride_v_head + d, mask=ok, other=0.0)
    tl.store(k_cache_ptr + dst, k_row.to(k_cache_ptr.dtype.element_ty), mask=ok)
    tl.store(v_cache_ptr + dst, v_row.to(v_cache_ptr.dtype.element_ty), mask=ok)


def interpreter_patched_language() -> bool:
    """True once the Triton interpreter has left its own builtins in ``triton.language.core``.

    Triton's interpreter swaps the language's builtins (``arange``, ``add``, ``where``, ...) for versions
    that run on numpy while it executes a kernel. A whole launch restores them afterwards, but a call of a
    ``@jit`` helper from inside a kernel (``tl.max`` and ``tl.sum`` are such helpers) patches
    ``triton.language.core`` again and never restores it (triton 3.9, ``runtime/interpreter.py``,
    ``InterpretedFunction.__call__``). From then on this process cannot compile a kernel for a GPU: the
    code generator calls the numpy builtins and fails with "'value' object has no attribute 'dtype'".
    A compiled kernel already in ``TRITON_CACHE_DIR`` hides it, since nothing is compiled then.
    ``triton.language`` re-exports the original builtins, so a patched core no longer matches them.
    """
    import sys

    lang = sys.modules.get("triton.language")
    return lang is not None and lang.core.arange is not lang.arange


def _kernels() -> tuple[JITFunction, JITFunction]:
    """JIT-wrap the kernels on first use, once per interpret mode (TRITON_INTERPRET is read here)."""
    global tl
    interpret = triton_interpreting()
    if not interpret and interpreter_patched_language():
        raise RuntimeError(
            "the Triton interpreter (TRITON_INTERPRET=1) already ran in this process and left triton.language "
            "patched, so kernels can no longer be compiled here; compile them in a fresh process"
        )
    if interpret:
        _squeeze_interpreter_index()
    if interpret not in _KERNELS:
        import triton
        import triton.language

        tl = triton.language
        _KERNELS[interpret] = (triton.jit(_unified_attention_kernel), triton.jit(_write_kv_kernel))
    return _KERNELS[interpret]


def _squeeze_interpreter_index() -> None:
    """Let triton 3.6's interpreter run on numpy 2.5: it turns a loop bound (``range(0, kv_end, TILE)``) into an
    int with ``int(array)``, which numpy 2.5 refuses for a 1-element array; triton 3.7 squeezes the array first
    (``runtime/interpreter.py``, ``_patch_lang_tensor``). The same squeeze, patched in once; no effect on 3.7."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "minivllm_squeezed", False):
        return

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patched.minivllm_squeezed = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched


def _pow2(n: int, floor: int = 1) -> int:
    return max(floor, 1 << (n - 1).bit_length())


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def triton_write_kv_cache(k: torch.Tensor, v: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Triton twin of :func:`minivllm.attention.backend.write_kv_cache` (no host sync for -1 slots)."""
    _, write_kernel = _kernels()
    k, v = _last_dim_contiguous(k), _last_dim_contiguous(v)
    k_cache, v_cache = kv_cache[0], kv_cache[1]
    num_kv_heads, head_dim = k.shape[1], k.shape[2]
    write_kernel[(k.shape[0],)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, H_PAD=_pow2(num_kv_heads), D_PAD=_pow2(head_dim),
        PAGE=kv_cache.shape[2],
    )  # fmt: skip


class TritonAttentionBackend(AttentionBackend):
    """Unified paged-varlen Triton kernel: the CUDA default. Needs no per-step plan."""

    name = "triton"

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kv_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        attn_kernel, _ = _kernels()
        q = _last_dim_contiguous(q)
        num_tokens, num_heads, head_dim = q.shape
        num_kv_heads = kv_cache.shape[3]
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
        if kv_cache.stride(-1) != 1:
            raise ValueError("kv_cache must be contiguous in its last (head_dim) dimension")
        triton_write_kv_cache(k, v, kv_cache, meta.slot_mapping)  # write first: chunks must see themselves
        group = num_heads // num_kv_heads
        rows = _pow2(group, 16)
        qb = rows // group
        out = torch.empty_like(q)
        out[meta.num_actual_tokens :].zero_()  # padding rows
        k_cache, v_cache = kv_cache[0], kv_cache[1]
        upcast = q.dtype == torch.bfloat16 and triton_interpreting()
        grid = (num_tokens // qb + meta.num_reqs, num_kv_heads)
        attn_kernel[grid](
            q, k_cache, v_cache, out, meta.query_start_loc, meta.seq_lens, meta.block_table,
            scale, meta.num_reqs,
            q.stride(0), q.stride(1), out.stride(0), out.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), meta.block_table.stride(0),
            GROUP=group, QB=qb, ROWS=rows, HEAD_DIM=head_dim, D_PAD=_pow2(head_dim, 16), PAGE=kv_cache.shape[2],
            TILE=32 if meta.max_query_len > 1 else 16, FP32_DOT=q.dtype == torch.float32 or upcast, UPCAST=upcast,
        )  # fmt: skip
        return out
