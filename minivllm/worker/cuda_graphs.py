"""CUDA graphs for the pure-decode step: one captured forward per batch size (``enforce_eager=False``).

A small model's decode step on a datacenter GPU is launch-bound: SmolLM2-135M's eager bf16 forward issues
about 1,200 kernels (30 layers x ~40), and the host needs longer to launch them than the GPU to run them. A
CUDA graph records the whole forward once and replays it with one launch.

Mirrors vLLM: ``vllm/v1/worker/gpu_model_runner.py`` ``capture_model`` / ``_dummy_run`` and the capture sizes
of ``vllm/config.py`` (``[1, 2, 4] + range(8, 513, 8)``, capped at ``max_num_seqs``), captured largest first
into one memory pool; a step is padded to the next captured size. Deviation: vLLM V1 (0.8.5) captures
piecewise graphs through torch.compile (attention left outside, so mixed batches replay too); minivllm captures
the full decode forward, attention included (later vLLM's ``cudagraph_mode=FULL_DECODE_ONLY``), and runs mixed
and prefill steps eagerly. That needs an attention backend that reads only device tensors: the Triton one.

Static buffers (every replay reads the same addresses): ``input_ids``, ``positions``, ``slot_mapping``,
``seq_lens``, ``block_table [max batch, max_model_len / block_size]`` and ``query_start_loc = 0..B`` (one token
per request). Padding rows: token 0 at position 0, slot -1 (nothing written), seq_len 1 over the null block 0;
their logits are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from minivllm.attention.metadata import AttentionMetadata

Forward = Callable[[torch.Tensor, AttentionMetadata], torch.Tensor]  # (input_ids, meta) -> logits [B, V]
Replay = Callable[[], torch.Tensor]  # runs the captured forward on the static buffers, returns the logits
Capture = Callable[[Callable[[], torch.Tensor], Any], Replay]  # (forward on static buffers, pool) -> replay


def capture_sizes(max_num_seqs: int) -> list[int]:
    """vLLM's default decode batch sizes ``[1, 2, 4, 8, 16, ..., 512]`` up to ``max_num_seqs`` (which is
    always included, so every decode batch has a graph)."""
    sizes = [s for s in [1, 2, 4, *range(8, 513, 8)] if s <= max_num_seqs]
    return sizes if max_num_seqs in sizes or max_num_seqs > 512 else [*sizes, max_num_seqs]


def graph_unsupported_reason(device: torch.device, backend_name: str) -> str | None:
    """Why this runner cannot capture decode graphs (None: it can)."""
    if device.type != "cuda":
        return f"CUDA graphs need a CUDA device; this runner is on {device.type}"
    if backend_name != "triton":
        return (
            f"the {backend_name} attention backend reads host-side lists each step, which a graph would freeze; "
            "use attention_backend='triton'"
        )
    return None


def cuda_capture(fn: Callable[[], torch.Tensor], pool: Any) -> Replay:
    """Record ``fn`` in a CUDA graph (after two warm-up calls: Triton compiles, cuBLAS picks its kernels)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


@dataclass
class DecodeGraphs:
    """The captured decode steps of one runner, and their static input buffers."""

    sizes: list[int]
    input_ids: torch.Tensor
    positions: torch.Tensor
    slot_mapping: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    replays: dict[int, Replay]

    @classmethod
    def capture(
        cls,
        forward: Forward,
        sizes: list[int],
        max_blocks_per_seq: int,
        block_size: int,
        device: torch.device,
        capture: Capture = cuda_capture,
    ) -> DecodeGraphs:
        """Capture ``forward`` at every size, largest first, sharing one memory pool (as vLLM does)."""
        n = max(sizes)
        i64, i32 = torch.int64, torch.int32
        graphs = cls(
            sorted(sizes),
            torch.zeros(n, dtype=i64, device=device),
            torch.zeros(n, dtype=i64, device=device),
            torch.full((n,), -1, dtype=i64, device=device),
            torch.ones(n, dtype=i32, device=device),
            torch.zeros(n, max_blocks_per_seq, dtype=i32, device=device),
            {},
        )
        query_start_loc = torch.arange(n + 1, dtype=i32, device=device)
        pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None
        for b in sorted(sizes, reverse=True):
            meta = AttentionMetadata(
                num_actual_tokens=b,
                query_start_loc=query_start_loc[: b + 1],
                seq_lens=graphs.seq_lens[:b],
                block_table=graphs.block_table[:b],
                slot_mapping=graphs.slot_mapping[:b],
                positions=graphs.positions[:b],
                max_query_len=1,
                max_seq_len=max_blocks_per_seq * block_size,
                logits_indices=torch.arange(b, device=device),
                block_size=block_size,
                query_start_loc_cpu=list(range(b + 1)),
                seq_lens_cpu=[1] * b,  # only its length (num_reqs) is read by the Triton backend
            )
            graphs.replays[b] = capture(_bound(forward, graphs.input_ids[:b], meta), pool)
        return graphs

    def padded_size(self, num_reqs: int) -> int | None:
        """The smallest captured size that holds ``num_reqs`` decodes (None: larger than every graph)."""
        return next((s for s in self.sizes if s >= num_reqs), None)

    def run(self, input_ids: list[int] | torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Logits ``[num_reqs, V]`` of one pure-decode step, ``meta`` built on the host for it (one token per
        request): its rows are copied into the static buffers, the rest padded, and the graph replayed."""
        r = len(input_ids)
        b = self.padded_size(r)
        if b is None or meta.num_actual_tokens != r:
            raise ValueError(f"not a decode step of at most {self.sizes[-1]} requests: {r} requests, "
                             f"{meta.num_actual_tokens} tokens")  # fmt: skip
        width = meta.block_table.shape[1]
        if width > self.block_table.shape[1]:
            raise ValueError(f"block table of {width} blocks is wider than the graphs' {self.block_table.shape[1]}")
        nb = {"non_blocking": True}
        self.input_ids[:r].copy_(torch.as_tensor(input_ids, dtype=torch.int64), **nb)
        self.positions[:r].copy_(meta.positions[:r], **nb)
        self.slot_mapping[:r].copy_(meta.slot_mapping[:r], **nb)
        self.seq_lens[:r].copy_(meta.seq_lens, **nb)
        self.block_table[:r, :width].copy_(meta.block_table, **nb)
        if r < b:  # padding rows: token 0 at position 0, nothing written, one key from the null block
            self.input_ids[r:b].zero_()
            self.positions[r:b].zero_()
            self.slot_mapping[r:b].fill_(-1)
            self.seq_lens[r:b].fill_(1)
            self.block_table[r:b].zero_()
        return self.replays[b]()[:r]


def _bound(forward: Forward, input_ids: torch.Tensor, meta: AttentionMetadata) -> Callable[[], torch.Tensor]:
    """``forward`` on one size's static views: what a graph records."""
    return lambda: forward(input_ids, meta)
