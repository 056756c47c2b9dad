"""GPU memory → KV blocks, with the activation peak of vLLM's profiling run (§11.7, the falling half).

vLLM sizes the KV cache after a profiling forward pass (0.8.5: ``vllm/v1/worker/gpu_worker.py``
``Worker.determine_available_memory`` calls ``vllm/v1/worker/gpu_model_runner.py``
``GPUModelRunner.profile_run``). ``profile_run`` executes a dummy batch of
``max_num_batched_tokens`` tokens spread over up to ``max_num_seqs`` dummy requests and then the
sampler on one row per request; the peak memory of that run (weights + activations) is
subtracted from ``total memory x gpu_memory_utilization`` and the rest becomes KV blocks:

    blocks = (gpu_memory x gpu_memory_utilization - weights - activation_peak(budget)) / bytes per block

so a bigger budget reserves more activation memory and leaves fewer KV blocks. This module is
opt-in: nothing in the simulator uses it unless a caller passes its ``num_blocks`` (as
``num_gpu_blocks``) or ``simulate(..., memory=...)``.

Activation bytes per token (Llama-2-7B, bf16), the tensors alive at the peak of one decoder
layer (layers run one after another, so one layer's intermediates are live at a time): the MLP's
``gate_up_proj`` output (2 x 11008) and ``SiluAndMul`` output (11008), plus the residual and the
normalised hidden state (2 x 4096): (3 x 11008 + 2 x 4096) x 2 bytes = 82,432 bytes. Attention is
skipped in the profiling run (no KV cache yet). Per dummy request: fp32 logits and probabilities
over the vocabulary, 2 x 4 x 32000 bytes. The CUDA allocator's fragmentation, torch.compile
buffers and non-torch memory (NCCL, cuBLAS workspaces) are not modelled: an estimate from the
tensor shapes, not a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class MemoryModel:
    """What the profiling run leaves for the KV cache on one GPU."""

    name: str
    gpu_memory_bytes: int  # the device's total memory
    weights_bytes: int
    kv_bytes_per_token: int  # 2 (K, V) x layers x kv_heads x head_dim x bytes
    activation_bytes_per_token: int  # grows with max_num_batched_tokens (the dummy batch)
    activation_bytes_per_seq: int  # grows with max_num_seqs (logits of the dummy requests)
    gpu_memory_utilization: float = 0.9  # vLLM's CacheConfig default
    other_bytes: int = 0  # non-torch memory vLLM also subtracts (CUDA context, cuBLAS / NCCL workspaces)

    def activation_peak(self, max_num_batched_tokens: int, max_num_seqs: int) -> int:
        """Activation bytes of the profiling run: the dummy batch plus one logits row per dummy request."""
        seqs = min(max_num_seqs, max_num_batched_tokens)  # vLLM spreads the dummy tokens over <= max_num_seqs
        return self.activation_bytes_per_token * max_num_batched_tokens + self.activation_bytes_per_seq * seqs

    def kv_cache_bytes(self, max_num_batched_tokens: int, max_num_seqs: int) -> int:
        """Bytes left for the KV cache; ValueError naming the budget when nothing is left."""
        budget = int(self.gpu_memory_bytes * self.gpu_memory_utilization)
        activations = self.activation_peak(max_num_batched_tokens, max_num_seqs)
        left = budget - self.weights_bytes - self.other_bytes - activations
        if left <= 0:
            raise ValueError(
                f"{self.name}: no memory left for the KV cache with max_num_batched_tokens={max_num_batched_tokens} "
                f"(budget {budget / GiB:.2f} GiB, weights {self.weights_bytes / GiB:.2f} GiB, other "
                f"{self.other_bytes / GiB:.2f} GiB, activations "
                f"{activations / GiB:.2f} GiB)."
            )
        return left

    def num_blocks(self, max_num_batched_tokens: int, max_num_seqs: int, block_size: int = 16) -> int:
        """KV blocks of ``block_size`` tokens the profiling run leaves at this budget."""
        return self.kv_cache_bytes(max_num_batched_tokens, max_num_seqs) // (self.kv_bytes_per_token * block_size)


def llama2_7b(gpu_memory_gib: float, name: str | None = None) -> MemoryModel:
    """Llama-2-7B in bf16 on a GPU of ``gpu_memory_gib`` GiB (the numbers of the llama2_7b_a100 preset)."""
    return MemoryModel(
        name=name or f"Llama-2-7B on {gpu_memory_gib:g} GiB",
        gpu_memory_bytes=int(gpu_memory_gib * GiB),
        weights_bytes=13_480_000_000,  # 6.74e9 parameters x 2 bytes (the preset's kv_cache_bytes note)
        kv_bytes_per_token=2 * 32 * 32 * 128 * 2,  # K and V, 32 layers, 32 KV heads x 128, bf16
        activation_bytes_per_token=(3 * 11008 + 2 * 4096) * 2,  # gate_up + SiluAndMul + residual + hidden
        activation_bytes_per_seq=2 * 4 * 32000,  # fp32 logits + probabilities per dummy request
    )
