"""Plain-torch paged attention: the CPU default and the oracle for the other backends (ch.4 §4).

Calls of ``scaled_dot_product_attention``, as vLLM's CPU backend makes for prefill
(``vllm/v1/attention/backends/cpu_attn.py``), fed by a host-side plan built once per step and reused
by every layer. Each request is one of three kinds (derived, never stored by the scheduler):

* ``decode``: one query row at the last position, sees every cached key. The decodes of a step go
  into one batched call (:func:`_decode_attention`), or two when their lengths differ a lot: their
  keys are gathered into a ``[B, max L]`` block padded with slot 0, a key-padding mask hides the padding;
* ``causal``: a fresh prefill (``q == L``): square causal, SDPA's ``is_causal`` fast path;
* ``chunk``: ``q`` rows after ``L - q`` cached tokens: an explicit bottom-right bool mask
  (SDPA's ``is_causal`` is top-left aligned and would be wrong here).

Gather indices cover exactly ``L`` positions per request, so padded block-table entries are never read.

On a CPU the decodes go instead to a small C++ kernel when it builds (:mod:`minivllm.attention.cpu_decode_kernel`,
``MINIVLLM_CPU_DECODE_KERNEL``): it reads K/V straight from the pages, with no gather and no padding. The torch
decode path above is its oracle and its fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

import torch
import torch.nn.functional as F

from minivllm.attention import cpu_decode_kernel
from minivllm.attention.backend import AttentionBackend, write_kv_cache
from minivllm.attention.metadata import AttentionMetadata


@dataclass
class RequestPlan:
    """How to attend for one request: its rows, its cache slots and its mask."""

    start: int
    end: int
    kind: str  # "decode" | "causal" | "chunk"
    slots: torch.Tensor  # int64 [L]: physical slot of each visible position
    mask: torch.Tensor | None  # bool [q, L] for "chunk", else None


@dataclass
class DecodePlan:
    """A group of one-token requests of similar length, attended in one padded batch."""

    rows: torch.Tensor  # int64 [B]: the query row of each decode in the flat batch
    slots: torch.Tensor  # int64 [B * max L]: visible slots, each request padded with slot 0
    mask: torch.Tensor  # bool [B, 1, 1, max L]: True where the key is visible
    max_len: int


@dataclass
class KernelDecode:
    """The one-token requests of a step, for the C++ kernel: it reads their pages itself."""

    rows: torch.Tensor  # int64 [B]: the query row of each decode in the flat batch
    reqs: torch.Tensor  # int64 [B]: its request index (row of block_table, entry of seq_lens)
    block_table: torch.Tensor  # int32 [R, max_blocks], unit stride along a row
    seq_lens: torch.Tensor  # int32 [R], contiguous


@dataclass
class TorchPlan:
    requests: list[RequestPlan]  # every request in batch order (with the kernel: the prompts and chunks only)
    decode: list[DecodePlan]  # the "decode" requests again, in one or two batches: forward attends them there
    kernel: KernelDecode | None = None  # instead of ``decode`` when the C++ kernel attends the decodes
    all_slots_valid: bool | None = None  # no -1 among the real tokens' slots (checked once per step, on CPU)
    writer: Callable[..., None] | None = None  # the C++ extension's K/V writer, where the kernel is in use


def visible_slots(meta: AttentionMetadata) -> torch.Tensor:
    """Physical slot of every visible KV position of every request, concatenated (int64 [sum L])."""
    seq_lens = meta.seq_lens.to(torch.int64)
    device = seq_lens.device
    total = sum(meta.seq_lens_cpu)
    req = torch.repeat_interleave(torch.arange(meta.num_reqs, device=device), seq_lens, output_size=total)
    starts = torch.cumsum(seq_lens, 0) - seq_lens
    pos = torch.arange(total, device=device) - starts[req]
    pages = meta.block_table[req, pos // meta.block_size].to(torch.int64)
    return pages * meta.block_size + pos % meta.block_size


def build_torch_plan(meta: AttentionMetadata, kernel: bool = False) -> TorchPlan:
    """The per-step plan: one batched index computation, then cheap per-request views.

    ``kernel``: the decodes go to the C++ kernel (no gather indices for them); the rest as without it.
    """
    qsl = meta.query_start_loc_cpu
    if kernel:
        decode_reqs = [r for r in range(meta.num_reqs) if qsl[r + 1] - qsl[r] == 1]
        if len(decode_reqs) == meta.num_reqs:  # a pure decode step: no SDPA call, no gather indices
            return TorchPlan([], [], _kernel_decode(meta, decode_reqs))
    all_slots = visible_slots(meta)
    slots = torch.split(all_slots, meta.seq_lens_cpu)  # typed, unlike Tensor.split
    device = meta.block_table.device
    requests = []
    decodes: list[int] = []
    for r, seq_len in enumerate(meta.seq_lens_cpu):
        q_len = qsl[r + 1] - qsl[r]
        mask = None
        if q_len == 1:
            kind = "decode"
            decodes.append(r)
            if kernel:
                continue
        elif q_len == seq_len:
            kind = "causal"
        else:
            kind = "chunk"
            mask = torch.ones(q_len, seq_len, dtype=torch.bool, device=device).tril(seq_len - q_len)
        requests.append(RequestPlan(qsl[r], qsl[r + 1], kind, slots[r], mask))
    if kernel:
        return TorchPlan(requests, [], _kernel_decode(meta, decodes) if decodes else None)
    runs = _Runs(all_slots, list(accumulate(meta.seq_lens_cpu, initial=0)))
    return TorchPlan(requests, _decode_groups(meta, decodes, runs))


def _kernel_decode(meta: AttentionMetadata, decodes: list[int]) -> KernelDecode:
    """Rows and request indices of the decodes; the tables in the kernel's layout (no copy when they already are)."""
    device = meta.block_table.device
    rows = torch.tensor([meta.query_start_loc_cpu[r] for r in decodes], dtype=torch.int64, device=device)
    table = meta.block_table.to(torch.int32)
    table = table if table.stride(-1) == 1 else table.contiguous()
    reqs = torch.tensor(decodes, dtype=torch.int64, device=device)
    return KernelDecode(rows, reqs, table, meta.seq_lens.to(torch.int32).contiguous())


@dataclass
class _Runs:
    """Every request's visible slots, concatenated, and where each request's run starts in them."""

    slots: torch.Tensor  # int64 [sum L]
    firsts: list[int]  # request r's run is slots[firsts[r] : firsts[r + 1]]


def _decode_groups(meta: AttentionMetadata, decodes: list[int], runs: _Runs) -> list[DecodePlan]:
    """One padded batch, or two when splitting the length-sorted decodes saves 15% of the gathered keys."""
    if not decodes:
        return []
    order = sorted(decodes, key=lambda r: meta.seq_lens_cpu[r])
    lens = [meta.seq_lens_cpu[r] for r in order]
    n = len(order)
    cost, cut = min((i * lens[i - 1] + (n - i) * lens[-1], i) for i in range(1, n + 1))  # i == n: no split
    if cut == n or cost > 0.85 * n * lens[-1]:
        return [_decode_plan(meta, decodes, runs)]
    return [_decode_plan(meta, order[:cut], runs), _decode_plan(meta, order[cut:], runs)]


def _decode_plan(meta: AttentionMetadata, decodes: list[int], runs: _Runs) -> DecodePlan:
    """The decodes' visible slots as one ``[B, max L]`` block, padded with slot 0: one gather from the runs."""
    device = meta.block_table.device
    lens = [meta.seq_lens_cpu[r] for r in decodes]
    max_len = max(lens)
    firsts = torch.tensor([runs.firsts[r] for r in decodes], dtype=torch.int64, device=device)
    pos = torch.arange(max_len, device=device)
    mask = pos[None, :] < torch.tensor(lens, device=device)[:, None]
    index = (firsts[:, None] + pos[None, :]).clamp_(max=runs.slots.shape[0] - 1)
    padded = torch.where(mask, runs.slots[index], 0)
    rows = torch.tensor([meta.query_start_loc_cpu[r] for r in decodes], dtype=torch.int64, device=device)
    return DecodePlan(rows, padded.flatten(), mask[:, None, None, :], max_len)


class TorchAttentionBackend(AttentionBackend):
    """SDPA over gathered cache rows (a call per prompt or chunk, batched decodes); any float dtype, CPU or CUDA."""

    name = "torch"

    def __init__(self, decode_kernel: str | None = None) -> None:
        """``decode_kernel``: the CPU decode kernel's mode, auto, 0 or 1 (None: ``MINIVLLM_CPU_DECODE_KERNEL``)."""
        self.decode_kernel = cpu_decode_kernel.kernel_mode(decode_kernel)

    def prepare(self, meta: AttentionMetadata) -> None:
        # The extension is built here at its first use (its K/V writer); forward() checks q's dtype and head size.
        kernel = meta.block_table.device.type == "cpu" and not cpu_decode_kernel.unavailable(self.decode_kernel)
        meta.plan = plan = build_torch_plan(meta, kernel)
        if kernel and meta.slot_mapping.is_contiguous():
            plan.writer = cpu_decode_kernel.get_reshape_and_cache(self.decode_kernel)
        if meta.slot_mapping.device.type == "cpu":  # one check per step instead of one per layer (a sync on CUDA)
            plan.all_slots_valid = bool((meta.slot_mapping[: meta.num_actual_tokens] >= 0).all())

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kv_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        if not isinstance(meta.plan, TorchPlan):
            self.prepare(meta)
        plan = meta.plan
        assert isinstance(plan, TorchPlan)  # prepare() built it; tells the type checker
        # (k.shape[0] is num_actual_tokens here unless the runner pads: then the padding slots are -1, checked.)
        all_valid = plan.all_slots_valid if k.shape[0] == meta.num_actual_tokens else None
        if plan.writer is not None and k.dtype == kv_cache.dtype and meta.slot_mapping.dtype == torch.int64:
            plan.writer(k, v, kv_cache, meta.slot_mapping)  # the C++ extension's reshape_and_cache: one call
        else:
            write_kv_cache(k, v, kv_cache, meta.slot_mapping, all_valid)
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # every real row is written below
        if q.shape[0] > meta.num_actual_tokens:
            out[meta.num_actual_tokens :] = 0  # padding rows
        if plan.kernel is not None:
            kd = plan.kernel
            use = cpu_decode_kernel.supports(q, kv_cache)
            paged_decode = cpu_decode_kernel.get_paged_decode(self.decode_kernel) if use else None
            if paged_decode is None:  # not built, or a dtype or head size it does not take: this step's torch plan
                valid, plan = plan.all_slots_valid, build_torch_plan(meta)
                plan.all_slots_valid = valid
                meta.plan = plan
            else:
                paged_decode(q, kv_cache, out, kd.rows, kd.reqs, kd.block_table, kd.seq_lens, scale)
        for dp in plan.decode:
            _decode_attention(q, kv_cache, dp, scale, out)
        if all(rp.kind == "decode" for rp in plan.requests):
            return out  # a pure decode step: nothing left for SDPA
        _, num_blocks, block_size, num_kv_heads, head_dim = kv_cache.shape
        k_flat = kv_cache[0].reshape(num_blocks * block_size, num_kv_heads, head_dim)
        v_flat = kv_cache[1].reshape(num_blocks * block_size, num_kv_heads, head_dim)
        gqa = q.shape[1] != num_kv_heads
        for rp in plan.requests:
            if rp.kind == "decode":
                continue  # done above, in the batched call
            query = q[rp.start : rp.end].transpose(0, 1).unsqueeze(0)  # [1, Hq, q, D]
            if rp.kind == "causal" and kv_cache.dtype == k.dtype:
                # A fresh prefill sees only this step's keys: the rows just written, no gather needed.
                key, value = k[rp.start : rp.end], v[rp.start : rp.end]
            else:
                key, value = k_flat.index_select(0, rp.slots), v_flat.index_select(0, rp.slots)
            key = key.transpose(0, 1).unsqueeze(0).to(q.dtype)  # [1, Hkv, L, D]
            value = value.transpose(0, 1).unsqueeze(0).to(q.dtype)
            o = F.scaled_dot_product_attention(
                query, key, value, attn_mask=rp.mask, is_causal=rp.kind == "causal", scale=scale, enable_gqa=gqa
            )
            out[rp.start : rp.end] = o[0].transpose(0, 1)
        return out


def _decode_attention(q: torch.Tensor, kv_cache: torch.Tensor, dp: DecodePlan, scale: float, out: torch.Tensor) -> None:
    """All one-token requests in one SDPA call; writes their rows of ``out``.

    Keys and values are gathered head by head into ``[Hkv, B, max L, D]`` (each head's ``[L, D]``
    matrix contiguous, as SDPA likes it). The ``Hq / Hkv`` query heads that share a KV head become the
    rows of one small query matrix (GQA packing, as in FlashAttention's decode path), so a decode is a
    ``[group, L]`` attention per KV head and no key is repeated.
    """
    _, num_blocks, block_size, num_kv_heads, head_dim = kv_cache.shape
    b, group = dp.rows.shape[0], q.shape[1] // num_kv_heads
    flat = kv_cache.view(2, num_blocks * block_size, num_kv_heads, head_dim)
    kv = torch.empty(2, num_kv_heads, b * dp.max_len, head_dim, dtype=kv_cache.dtype, device=kv_cache.device)
    for i in range(2):
        for h in range(num_kv_heads):
            torch.index_select(flat[i, :, h], 0, dp.slots, out=kv[i, h])
    kv = kv.view(2, num_kv_heads, b, dp.max_len, head_dim).transpose(1, 2).to(q.dtype)  # [2, B, Hkv, L, D]
    query = q.index_select(0, dp.rows).view(b, num_kv_heads, group, head_dim)
    o = F.scaled_dot_product_attention(query, kv[0], kv[1], attn_mask=dp.mask, scale=scale)
    out.index_copy_(0, dp.rows, o.reshape(b, num_kv_heads * group, head_dim))
