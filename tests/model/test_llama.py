"""Flat-token Llama vs HF transformers: one prompt, two packed prompts, chunked prefill (§11.6, ch.4)."""

from __future__ import annotations

import pytest
import torch

from minivllm.attention.metadata import build_attention_metadata
from minivllm.attention.selector import get_attn_backend
from minivllm.model.config import LlamaArchConfig
from minivllm.model.llama import LlamaForCausalLM, RMSNorm
from minivllm.model.loader import load_model


def hf_logits(folder: str, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Reference logits [L, V] per prompt from HF transformers (fp32, one prompt at a time)."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return [hf(torch.tensor([p])).logits[0] for p in prompts]


def paged_step(
    model: LlamaForCausalLM,
    kv_caches: torch.Tensor,
    chunks: list[list[int]],
    computed: list[int],
    block_ids: list[list[int]],
    block_size: int,
) -> torch.Tensor:
    """Run one flat-batch step (chunk r starts at position computed[r]); return logits of every row [T, V]."""
    meta = build_attention_metadata(computed, [len(c) for c in chunks], block_ids, block_size, "cpu")
    backend = get_attn_backend("torch", "cpu", torch.float32, block_size, model.arch.head_dim)
    backend.prepare(meta)
    ids = torch.tensor([t for c in chunks for t in c], dtype=torch.int64)
    with torch.no_grad():
        hidden = model(ids, meta.positions, kv_caches, meta, backend)
        return model.compute_logits(hidden)


def new_kv_caches(model: LlamaForCausalLM, num_blocks: int, block_size: int) -> torch.Tensor:
    a = model.arch
    dtype = next(model.parameters()).dtype
    return torch.zeros(a.num_layers, 2, num_blocks, block_size, a.num_kv_heads, a.head_dim, dtype=dtype)


def permuted_blocks(lengths: list[int], num_blocks: int, block_size: int, seed: int = 0) -> list[list[int]]:
    """Disjoint, shuffled block ids per request (block 0 is kept back as vLLM's null block)."""
    perm = (torch.randperm(num_blocks - 1, generator=torch.Generator().manual_seed(seed)) + 1).tolist()
    out, i = [], 0
    for n in lengths:
        need = -(-n // block_size)
        out.append(perm[i : i + need])
        i += need
    return out


def assert_close(ours: torch.Tensor, ref: torch.Tensor, rel: float = 1e-4) -> None:
    """Max abs error within ``rel`` x the reference's largest magnitude (fp32)."""
    err = (ours - ref).abs().max().item()
    scale = ref.abs().max().item()
    assert err <= rel * scale, f"max abs err {err:.3g} > {rel} x scale {scale:.3g}"


def prompts_for(vocab: int, lengths: list[int], seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]


@pytest.fixture(
    scope="module", params=["tiny_qwen2", "tiny_llama", "tiny_mistral", pytest.param("smollm2", marks=pytest.mark.slow)]
)
def case(request: pytest.FixtureRequest):
    """(loaded model, prompts, block size, HF reference logits per prompt)."""
    if request.param == "smollm2":
        lm = request.getfixturevalue("smollm2")
        tok = lm.tokenizer
        texts = ["The capital of France is", "Paged attention stores the KV cache in fixed-size blocks, so"]
        prompts = [tok(t)["input_ids"] for t in texts]
        block_size = 16
    else:
        lm = load_model(request.getfixturevalue(request.param))
        prompts = prompts_for(lm.arch.vocab_size, [37, 13], seed=len(request.param))
        block_size = 4
    return lm, prompts, block_size, hf_logits(lm.hf_folder, prompts)


def test_single_prompt_matches_hf(case) -> None:
    lm, prompts, bs, ref = case
    caches = new_kv_caches(lm.model, num_blocks=32, block_size=bs)
    blocks = permuted_blocks([len(prompts[0])], 32, bs)
    logits = paged_step(lm.model, caches, [prompts[0]], [0], blocks, bs)
    assert_close(logits, ref[0])


def test_two_prompts_packed_match_hf(case) -> None:
    lm, prompts, bs, ref = case
    caches = new_kv_caches(lm.model, num_blocks=32, block_size=bs)
    blocks = permuted_blocks([len(p) for p in prompts], 32, bs, seed=1)
    logits = paged_step(lm.model, caches, prompts, [0, 0], blocks, bs)
    n0 = len(prompts[0])
    assert_close(logits[:n0], ref[0])
    assert_close(logits[n0:], ref[1])


def test_two_chunk_prefill_equals_one_shot(case) -> None:
    lm, prompts, bs, ref = case
    prompt = prompts[0]
    blocks = permuted_blocks([len(prompt)], 32, bs, seed=2)
    caches = new_kv_caches(lm.model, num_blocks=32, block_size=bs)
    cut = len(prompt) // 2 + 1  # not on a block boundary for the sizes used here
    first = paged_step(lm.model, caches, [prompt[:cut]], [0], blocks, bs)
    second = paged_step(lm.model, caches, [prompt[cut:]], [cut], blocks, bs)
    assert_close(torch.cat([first, second]), ref[0])


def test_decode_step_after_prefill(tiny_qwen2: str) -> None:
    """A prompt prefilled, then one decode token next to another request's prefill, matches HF."""
    lm = load_model(tiny_qwen2)
    p0, p1 = prompts_for(lm.arch.vocab_size, [9, 6], seed=5)
    full0 = p0 + [7]
    ref0, ref1 = hf_logits(lm.hf_folder, [full0, p1])
    blocks = permuted_blocks([len(full0), len(p1)], 16, 4, seed=3)
    caches = new_kv_caches(lm.model, 16, 4)
    paged_step(lm.model, caches, [p0], [0], blocks[:1], 4)
    logits = paged_step(lm.model, caches, [[7], p1], [len(p0), 0], blocks, 4)
    assert_close(logits[0], ref0[-1])
    assert_close(logits[1:], ref1)


def test_bfloat16_close_to_float32(tiny_llama: str) -> None:
    lm32, lm16 = load_model(tiny_llama), load_model(tiny_llama, dtype="bfloat16")
    assert lm16.model.embed_tokens.weight.dtype == torch.bfloat16
    assert lm16.model.cos_cache.dtype == torch.float32
    prompt = prompts_for(lm32.arch.vocab_size, [11])[0]
    blocks = permuted_blocks([11], 8, 4)
    l32 = paged_step(lm32.model, new_kv_caches(lm32.model, 8, 4), [prompt], [0], blocks, 4)
    l16 = paged_step(lm16.model, new_kv_caches(lm16.model, 8, 4), [prompt], [0], blocks, 4)
    assert l16.dtype == torch.bfloat16
    assert_close(l16.float(), l32, rel=0.1)


def test_arch_from_legacy_and_v5_rope_fields() -> None:
    base = dict(
        architectures=["LlamaForCausalLM"],
        vocab_size=10,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    legacy = LlamaArchConfig.from_dict(
        {**base, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    )
    v5 = LlamaArchConfig.from_dict(
        {**base, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}}
    )
    assert legacy.rope_theta == v5.rope_theta == 500000.0
    assert legacy.rope_scaling == v5.rope_scaling == {"rope_type": "llama3", "factor": 8.0}
    assert LlamaArchConfig.from_dict({**base, "rope_parameters": {"rope_type": "default"}}).rope_scaling is None
    assert legacy.head_dim == 4 and not legacy.qkv_bias
    qwen = LlamaArchConfig.from_dict({**base, "architectures": ["Qwen2ForCausalLM"]})
    assert qwen.qkv_bias and not qwen.o_bias
    with pytest.raises(ValueError, match="yarn.*default, llama3, linear"):
        LlamaArchConfig.from_dict({**base, "rope_scaling": {"type": "yarn", "factor": 4.0}})


@pytest.mark.parametrize("rows", [1, 16, 2048])
@pytest.mark.parametrize("size", [64, 576, 960])
def test_fp32_rms_norm_is_hf_formula_bit_for_bit(rows: int, size: int) -> None:
    torch.manual_seed(rows + size)
    norm = RMSNorm(size, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(size))
    for scale in (1e-3, 1.0, 80.0):
        x = torch.randn(rows, size) * scale
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)  # LlamaRMSNorm in transformers
        assert torch.equal(norm(x), norm.weight * h)
