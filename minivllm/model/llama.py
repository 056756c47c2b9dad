"""Flat-token Llama family (Llama, Qwen2, Mistral) that reads and writes the paged KV cache.

Mirrors ``vllm/model_executor/models/llama.py``: every token of every scheduled request sits in one
``[T]`` batch (§11.6, the flat batch), positions are absolute, and attention goes through a
backend that writes K/V via ``slot_mapping`` and reads the context via ``block_table`` (ch.4,
paged attention). As in vLLM, q/k/v use one fused projection and gate/up another; the weights
are concatenated when the HF checkpoint is loaded. Numerics follow HF transformers exactly
(RMSNorm in fp32, RoPE cos/sin in fp32 cast to the model dtype, rotate-half layout).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minivllm.model.config import LlamaArchConfig

if TYPE_CHECKING:  # annotations only: the model layer does not import the attention package at run time
    from minivllm.attention import AttentionBackend, AttentionMetadata


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in fp32, as HF's ``LlamaRMSNorm``."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            # The same formula in one fused kernel, bit for bit (tests/model/test_llama.py checks it).
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope_inv_freq(arch: LlamaArchConfig) -> Tensor:
    """Inverse frequencies for the default, "linear" and "llama3" rope types (fp32, [D/2])."""
    dim = arch.head_dim
    inv_freq = 1.0 / (arch.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim))
    scaling = arch.rope_scaling
    if scaling is None:
        return inv_freq
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return inv_freq / factor
    # llama3: keep high frequencies, divide low ones by factor, interpolate in between.
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_len = scaling.get("original_max_position_embeddings", arch.max_position_embeddings)
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(medium, smoothed, scaled)


def rope_tables(cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """``[T, D/2]`` cos/sin -> the ``[T, 1, D]`` tables :func:`apply_rope` multiplies by: ``(c, c)`` and ``(-s, s)``.

    Built once per step (every layer shares them), so a layer's RoPE is four operations.
    """
    return torch.cat([cos, cos], -1)[:, None, :], torch.cat([-sin, sin], -1)[:, None, :]


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE: x [T, H, D]; cos/sin [T, 1, D] from :func:`rope_tables`, already in x's dtype.

    ``x * (c, c) + (x2, x1) * (-s, s)``: the same products and sums as HF's ``x * cos + rotate_half(x) * sin``
    with ``rotate_half(x) = (-x2, x1)`` (``(-a) * b`` and ``a * (-b)`` are the same number in IEEE arithmetic),
    so the same bits.
    """
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


class LlamaAttention(nn.Module):
    """Fused qkv projection, RoPE at absolute positions, paged attention through the backend, o_proj."""

    def __init__(self, arch: LlamaArchConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = arch.num_heads, arch.num_kv_heads, arch.head_dim
        self.q_size, self.kv_size = arch.q_size, arch.kv_size
        self.scale = self.head_dim**-0.5
        self.qkv_proj = nn.Linear(arch.hidden_size, self.q_size + 2 * self.kv_size, bias=arch.qkv_bias)
        self.o_proj = nn.Linear(self.q_size, arch.hidden_size, bias=arch.o_bias)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: Tensor, meta: AttentionMetadata, backend: AttentionBackend
    ) -> Tensor:
        t = x.shape[0]
        qk, v = self.qkv_proj(x).split([self.q_size + self.kv_size, self.kv_size], dim=-1)
        # q and k heads side by side: one RoPE pass over all of them (the same arithmetic per element).
        qk = apply_rope(qk.view(t, self.num_heads + self.num_kv_heads, self.head_dim), cos, sin)
        q, k = qk.split([self.num_heads, self.num_kv_heads], dim=1)
        v = v.reshape(t, self.num_kv_heads, self.head_dim)
        out = backend.forward(q, k, v, kv_cache, meta, self.scale)
        return self.o_proj(out.reshape(t, self.q_size))


class LlamaMLP(nn.Module):
    """SwiGLU with gate and up fused into one matmul."""

    def __init__(self, arch: LlamaArchConfig) -> None:
        super().__init__()
        self.intermediate_size = arch.intermediate_size
        self.gate_up_proj = nn.Linear(arch.hidden_size, 2 * arch.intermediate_size, bias=arch.mlp_bias)
        self.down_proj = nn.Linear(arch.intermediate_size, arch.hidden_size, bias=arch.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class LlamaDecoderLayer(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then h + mlp(norm(h))."""

    def __init__(self, arch: LlamaArchConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.self_attn = LlamaAttention(arch)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.mlp = LlamaMLP(arch)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: Tensor, meta: AttentionMetadata, backend: AttentionBackend
    ) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_cache, meta, backend)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaForCausalLM(nn.Module):
    """Decoder over a flat ``[T]`` token batch (§11.6); logits only where the runner asks (compute_logits)."""

    cos_cache: Tensor  # buffers registered by init_rope_cache (declared for the type checker)
    sin_cache: Tensor

    def __init__(self, arch: LlamaArchConfig) -> None:
        super().__init__()
        self.arch = arch
        # Placeholder weights (zeros, no random init: cheap on the meta device); load_hf_state_dict fills them.
        self.embed_tokens = nn.Embedding(
            arch.vocab_size, arch.hidden_size, _weight=torch.zeros(arch.vocab_size, arch.hidden_size)
        )
        self.layers = nn.ModuleList(LlamaDecoderLayer(arch) for _ in range(arch.num_layers))
        self.norm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.lm_head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)
        self.tie_weights()
        self.init_rope_cache()

    def tie_weights(self) -> None:
        """Share lm_head with the embedding when the checkpoint ties them (again after ``to_empty``)."""
        if self.arch.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def init_rope_cache(self) -> None:
        """(Re)compute the fp32 cos/sin tables ``[max_position_embeddings, D/2]`` on the weights' device.

        Call again after ``to_empty`` / ``.to(dtype)``: the tables must stay fp32 (cast per forward).
        """
        device = self.embed_tokens.weight.device
        shape = (self.arch.max_position_embeddings, self.arch.head_dim // 2)
        if device.type == "meta":
            cos = sin = torch.empty(shape, device=device)
        else:
            pos = torch.arange(shape[0], dtype=torch.int64, device="cpu").float()
            freqs = pos[:, None] * rope_inv_freq(self.arch)[None, :]
            cos, sin = freqs.cos().to(device), freqs.sin().to(device)
        self.register_buffer("cos_cache", cos, persistent=False)
        self.register_buffer("sin_cache", sin, persistent=False)

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor,
        kv_caches: Tensor,
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> Tensor:
        """input_ids/positions [T] -> final hidden states [T, hidden].

        ``kv_caches`` is ``[num_layers, 2, num_blocks, block_size, Hkv, D]``; layer i uses ``kv_caches[i]``.
        """
        x = self.embed_tokens(input_ids)
        # [T, 1, D]: broadcast over heads, built once a step
        cos, sin = rope_tables(self.cos_cache[positions].to(x.dtype), self.sin_cache[positions].to(x.dtype))
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, kv_caches[i], meta, backend)
        return self.norm(x)

    def compute_logits(self, hidden: Tensor) -> Tensor:
        """hidden [N, hidden] -> logits [N, vocab] (lm_head, tied to the embedding when configured)."""
        return self.lm_head(hidden)

    def load_hf_state_dict(self, state_dict: dict[str, Tensor]) -> None:
        """Load HF-named weights, concatenating q/k/v and gate/up into the fused projections.

        Parameters still on the meta device (model built under ``torch.device("meta")``) are replaced
        by the checkpoint tensors (cast to the parameter dtype, on the checkpoint's device); others are
        copied into in place. Raises ``KeyError`` naming unexpected or missing weights.
        """
        self.tie_weights()
        pieces: dict[str, dict[int, Tensor]] = {}
        for hf_name, tensor in state_dict.items():
            if "rotary_emb" in hf_name or (hf_name == "lm_head.weight" and self.arch.tie_word_embeddings):
                continue
            parts = hf_name.removeprefix("model.").split(".")
            target, shard = _FUSED.get(parts[-2], (parts[-2], 0)) if len(parts) >= 2 else (parts[0], 0)
            if len(parts) >= 2:
                parts[-2] = target
            pieces.setdefault(".".join(parts), {})[shard] = tensor
        own = dict(self.named_parameters())
        unexpected = sorted(set(pieces) - set(own))
        if unexpected:
            raise KeyError(f"Unexpected weights for {self.arch.architecture}: {unexpected[:3]}.")
        missing = [n for n in own if len(pieces.get(n, {})) != _num_shards(n)]
        if missing:
            raise KeyError(f"Checkpoint is missing {len(missing)} weights, e.g. {missing[:3]}.")
        for name, param in own.items():
            shards = pieces[name]
            tensor = torch.cat([shards[i] for i in range(len(shards))]) if len(shards) > 1 else shards[0]
            if tuple(tensor.shape) != tuple(param.shape):
                raise ValueError(f"Weight {name} has shape {tuple(tensor.shape)}, expected {tuple(param.shape)}.")
            if param.is_meta:
                module_name, _, attr = name.rpartition(".")
                new = nn.Parameter(tensor.to(param.dtype), requires_grad=False)
                setattr(self.get_submodule(module_name), attr, new)
            else:
                with torch.no_grad():
                    param.copy_(tensor)
        self.tie_weights()


_FUSED = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}


def _num_shards(name: str) -> int:
    return 3 if ".qkv_proj." in name else 2 if ".gate_up_proj." in name else 1
