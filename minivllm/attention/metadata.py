"""Varlen attention metadata: the contract between the engine and every attention backend (§11.6).

Mirrors what ``vllm/v1/worker/gpu_model_runner.py`` ``_prepare_inputs`` builds each step (and the
``FlashAttentionMetadata`` of ``vllm/v1/attention/backends/flash_attn.py``). All scheduled tokens of
all requests are packed back to back into one flat batch of ``T`` tokens; request ``r`` owns rows
``query_start_loc[r] : query_start_loc[r+1]``. Nothing here says "prefill" or "decode": a request is
just ``num_computed_tokens`` (context already in the KV cache) plus ``num_scheduled_tokens`` (this
step's chunk), and the causal rule is bottom-right aligned (query ``i`` sits at absolute position
``context + i``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class AttentionMetadata:
    """One step's flat-batch description, shared by every layer of the model.

    Worked example (block size 4): computed ``[5, 0, 8]``, scheduled ``[1, 6, 3]`` and block tables
    ``[[7, 3], [1, 9], [4, 6, 2]]`` give positions ``[5, 0..5, 8..10]``, slot_mapping
    ``[13, 4, 5, 6, 7, 36, 37, 8, 9, 10]`` and ``query_start_loc = [0, 1, 7, 10]``.
    """

    num_actual_tokens: int  # T = total scheduled tokens (rows past T are padding)
    query_start_loc: torch.Tensor  # int32 [R+1]
    seq_lens: torch.Tensor  # int32 [R]: context + this step's tokens
    block_table: torch.Tensor  # int32 [R, max_blocks], padded with 0 (the null block id)
    slot_mapping: torch.Tensor  # int64 [T_padded]: physical slot of each token, -1 = padding (skip)
    positions: torch.Tensor  # int64 [T_padded]: absolute position (RoPE), 0 for padding
    max_query_len: int
    max_seq_len: int
    logits_indices: torch.Tensor  # int64: rows whose logits are needed
    block_size: int
    query_start_loc_cpu: list[int]  # host copies: backends never .item() per request
    seq_lens_cpu: list[int]
    plan: object | None = None  # backend-specific host plan, built once per step by backend.prepare()

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_cpu)


def _validate(
    num_computed_tokens: list[int],
    num_scheduled_tokens: list[int],
    block_ids: list[list[int]],
    block_size: int,
    num_spec_tokens: list[int] | None,
) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    num_reqs = len(num_scheduled_tokens)
    if num_reqs == 0:
        raise ValueError("cannot build attention metadata for an empty batch (no scheduled requests)")
    if len(num_computed_tokens) != num_reqs or len(block_ids) != num_reqs:
        raise ValueError(
            f"per-request lists differ in length: num_computed_tokens={len(num_computed_tokens)}, "
            f"num_scheduled_tokens={num_reqs}, block_ids={len(block_ids)}"
        )
    if num_spec_tokens is not None and len(num_spec_tokens) != num_reqs:
        raise ValueError(f"num_spec_tokens has {len(num_spec_tokens)} entries for {num_reqs} requests")
    for r, (c, n, ids) in enumerate(zip(num_computed_tokens, num_scheduled_tokens, block_ids)):
        if c < 0:
            raise ValueError(f"request {r}: num_computed_tokens must be >= 0, got {c}")
        if n < 1:
            raise ValueError(f"request {r}: num_scheduled_tokens must be >= 1, got {n}")
        needed = -(-(c + n) // block_size)
        if len(ids) < needed:
            raise ValueError(
                f"request {r}: block table does not cover seq_len {c + n} with block_size {block_size}: "
                f"needs {needed} blocks, given {len(ids)}"
            )
        if min(ids) < 0:  # ids is not empty: needed >= 1
            raise ValueError(f"request {r}: negative block id in block table {list(ids)}")
        if num_spec_tokens is not None and not 0 <= num_spec_tokens[r] < n:
            raise ValueError(
                f"request {r}: num_spec_tokens must be in [0, num_scheduled_tokens) = [0, {n}), "
                f"got {num_spec_tokens[r]}"
            )


def build_attention_metadata(
    num_computed_tokens: list[int],
    num_scheduled_tokens: list[int],
    block_ids: list[list[int]],
    block_size: int,
    device: torch.device | str = "cpu",
    num_spec_tokens: list[int] | None = None,
    pad_to: int | None = None,
) -> AttentionMetadata:
    """Build the varlen metadata of one step, in scheduler order (§11.6).

    ``block_ids[r]`` is request ``r``'s whole block table (it may hold more blocks than needed).
    ``num_spec_tokens[r]`` (spec decode) is the number of draft tokens at the end of request ``r``'s
    chunk: its logits rows become the last ``1 + k_r`` rows instead of the last row.
    ``pad_to`` pads ``positions`` (with 0) and ``slot_mapping`` (with -1) to a fixed token count, as a
    CUDA-graph runner would; ``num_actual_tokens`` stays the real count.
    """
    _validate(num_computed_tokens, num_scheduled_tokens, block_ids, block_size, num_spec_tokens)
    num_reqs = len(num_scheduled_tokens)
    max_blocks = max(1, max(len(ids) for ids in block_ids))
    table = np.zeros((num_reqs, max_blocks), dtype=np.int32)  # row r: request r's block ids, then 0 (the null block)
    for r, ids in enumerate(block_ids):
        table[r, : len(ids)] = ids
    computed = np.array(num_computed_tokens, dtype=np.int64)
    scheduled = np.array(num_scheduled_tokens, dtype=np.int64)
    return _build(computed, scheduled, table, block_size, device, num_spec_tokens, pad_to)


def build_attention_metadata_from_arrays(
    num_computed_tokens: np.ndarray,
    num_scheduled_tokens: np.ndarray,
    block_table: np.ndarray,
    num_blocks: np.ndarray,
    block_size: int,
    device: torch.device | str = "cpu",
    num_spec_tokens: list[int] | None = None,
    pad_to: int | None = None,
) -> AttentionMetadata:
    """:func:`build_attention_metadata` from the persistent batch's arrays (``minivllm.worker.input_batch``).

    ``block_table[r, :num_blocks[r]]`` is request ``r``'s table and the rest of its row is 0 (the metadata
    may share the array's memory). The same metadata, tensor for tensor; the checks run vectorised, and only
    a batch that fails them goes through the per-request checks, for their messages.
    """
    computed = np.asarray(num_computed_tokens, dtype=np.int64)
    scheduled = np.asarray(num_scheduled_tokens, dtype=np.int64)
    num_reqs = len(scheduled)
    ok = num_reqs > 0 and block_size >= 1 and len(computed) == num_reqs == len(num_blocks) == len(block_table)
    if ok:
        needed = -(-(computed + scheduled) // block_size)
        ok = bool((computed >= 0).all() and (scheduled >= 1).all() and (num_blocks >= needed).all())
        ok = ok and bool((block_table >= 0).all())
    if ok and num_spec_tokens is not None:
        ok = len(num_spec_tokens) == num_reqs and all(0 <= k < n for k, n in zip(num_spec_tokens, scheduled.tolist()))
    if not ok:  # the per-request checks say what is wrong
        tables = [row[:n].tolist() for row, n in zip(block_table, np.asarray(num_blocks).tolist())]
        _validate(computed.tolist(), scheduled.tolist(), tables, block_size, num_spec_tokens)
        raise ValueError("invalid attention metadata arrays")  # not reached: _validate raised
    table = block_table[:, : max(1, int(num_blocks.max()))]
    return _build(computed, scheduled, table, block_size, device, num_spec_tokens, pad_to)


def _build(
    computed: np.ndarray,
    scheduled: np.ndarray,
    block_table: np.ndarray,
    block_size: int,
    device: torch.device | str,
    num_spec_tokens: list[int] | None,
    pad_to: int | None,
) -> AttentionMetadata:
    """The metadata of checked inputs: ``computed``, ``scheduled`` int64 [R], ``block_table`` int32 [R, B].

    Worked out in numpy on the host (a small array op costs about a microsecond, a small tensor op several),
    then one tensor per field to ``device`` (vLLM's ``_prepare_inputs`` over its CPU buffers).
    """
    num_reqs = len(scheduled)
    ends = np.cumsum(scheduled)
    total = int(ends[-1])
    if pad_to is not None and pad_to < total:
        raise ValueError(f"pad_to={pad_to} is smaller than the {total} scheduled tokens")
    starts = ends - scheduled
    seq_lens = computed + scheduled
    # Vectorised over the flat batch: request id of every token, then its absolute position.
    req = np.repeat(np.arange(num_reqs), scheduled)  # [0, 0, 1, 2, 2, 2, ...]
    positions = np.arange(total, dtype=np.int64) + (computed - starts)[req]
    slot_mapping = block_table[req, positions // block_size].astype(np.int64) * block_size + positions % block_size

    if num_spec_tokens is None:
        logits_indices = ends - 1
    else:
        per_req = np.array(num_spec_tokens, dtype=np.int64) + 1
        owner = np.repeat(np.arange(num_reqs), per_req)
        offset = np.arange(int(per_req.sum())) - (np.cumsum(per_req) - per_req)[owner]
        logits_indices = ends[owner] - per_req[owner] + offset

    if pad_to is not None and pad_to > total:
        pad = pad_to - total
        positions = np.concatenate([positions, np.zeros(pad, dtype=np.int64)])
        slot_mapping = np.concatenate([slot_mapping, np.full(pad, -1, dtype=np.int64)])

    qsl = np.zeros(num_reqs + 1, dtype=np.int32)
    qsl[1:] = ends
    seq_lens_cpu = seq_lens.tolist()
    return AttentionMetadata(
        num_actual_tokens=total,
        query_start_loc=to_device(qsl, device),
        seq_lens=to_device(seq_lens.astype(np.int32), device),
        block_table=to_device(np.ascontiguousarray(block_table, dtype=np.int32), device),
        slot_mapping=to_device(slot_mapping, device),
        positions=to_device(positions, device),
        max_query_len=int(scheduled.max()),
        max_seq_len=max(seq_lens_cpu),
        logits_indices=to_device(logits_indices, device),
        block_size=block_size,
        query_start_loc_cpu=qsl.tolist(),
        seq_lens_cpu=seq_lens_cpu,
    )


def to_device(a: np.ndarray, device: torch.device | str) -> torch.Tensor:
    """One host array as a tensor on ``device``: shared memory on the CPU; on CUDA, one copy from pinned
    memory (PyTorch's caching host allocator), queued without waiting (vLLM's ``non_blocking`` copies)."""
    t, kind = torch.from_numpy(a), torch.device(device).type
    if kind == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t if kind == "cpu" else t.to(device)
