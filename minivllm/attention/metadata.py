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

from array import array
from dataclasses import dataclass
from itertools import accumulate

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
    qsl = [0, *accumulate(num_scheduled_tokens)]
    total = qsl[-1]
    if pad_to is not None and pad_to < total:
        raise ValueError(f"pad_to={pad_to} is smaller than the {total} scheduled tokens")
    seq_lens = [c + n for c, n in zip(num_computed_tokens, num_scheduled_tokens)]

    max_blocks = max(1, max(len(ids) for ids in block_ids))
    padded = [0] * (num_reqs * max_blocks)  # row r: request r's block ids, then 0 (the null block)
    for r, ids in enumerate(block_ids):
        padded[r * max_blocks : r * max_blocks + len(ids)] = ids
    block_table = _int_tensor(padded, torch.int32).view(num_reqs, max_blocks)

    # Vectorised over the flat batch: request id of every token, then its absolute position.
    qsl_t = _int_tensor(qsl)
    starts, ends = qsl_t[:-1], qsl_t[1:]
    computed = _int_tensor(num_computed_tokens)
    req = torch.repeat_interleave(ends - starts, output_size=total)  # [0, 0, 1, 2, 2, 2, ...]
    positions = torch.arange(total, dtype=torch.int64) + (computed - starts)[req]
    slot_mapping = block_table[req, positions // block_size].to(torch.int64) * block_size + positions % block_size

    if num_spec_tokens is None:
        logits_indices = ends - 1
    else:
        spec = _int_tensor(num_spec_tokens)
        per_req = spec + 1
        owner = torch.repeat_interleave(torch.arange(num_reqs), per_req)
        offset = torch.arange(int(per_req.sum())) - (torch.cumsum(per_req, 0) - per_req)[owner]
        logits_indices = ends[owner] - per_req[owner] + offset

    if pad_to is not None and pad_to > total:
        pad = pad_to - total
        positions = torch.cat([positions, torch.zeros(pad, dtype=torch.int64)])
        slot_mapping = torch.cat([slot_mapping, torch.full((pad,), -1, dtype=torch.int64)])

    return AttentionMetadata(
        num_actual_tokens=total,
        query_start_loc=qsl_t.to(device, torch.int32),
        seq_lens=_int_tensor(seq_lens, torch.int32).to(device),
        block_table=block_table.to(device),
        slot_mapping=slot_mapping.to(device),
        positions=positions.to(device),
        max_query_len=max(num_scheduled_tokens),
        max_seq_len=max(seq_lens),
        logits_indices=logits_indices.to(device),
        block_size=block_size,
        query_start_loc_cpu=qsl,
        seq_lens_cpu=seq_lens,
    )


def _int_tensor(values: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """``torch.tensor(values, dtype=dtype)``, several times faster for long lists: ``torch.tensor`` reads a
    list element by element, ``array`` packs it in C and the tensor then shares its memory."""
    return torch.frombuffer(array("q" if dtype == torch.int64 else "i", values), dtype=dtype)
