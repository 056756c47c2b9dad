"""Reference outputs from HF transformers, shared by the CPU and CUDA equality tests."""

from __future__ import annotations

import torch


def hf_greedy(folder: str, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """Reference: HF generate, one prompt at a time (no padding), EOS disabled."""
    return hf_greedy_on(folder, prompts, new_tokens, "cpu")


def hf_greedy_on(folder: str, prompts: list[list[int]], new_tokens: int, device: str) -> list[list[int]]:
    from transformers import AutoModelForCausalLM, GenerationConfig

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    hf.generation_config.eos_token_id = hf.config.eos_token_id = None  # generate exactly new_tokens
    gen = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    outs = []
    with torch.inference_mode():
        for p in prompts:
            ids = hf.generate(
                torch.tensor([p], device=device),
                generation_config=gen,
                attention_mask=torch.ones(1, len(p), device=device),
            )
            outs.append(ids[0, len(p) :].tolist())
    return outs


def make_prompts(vocab: int, lengths: list[int], shared: int = 0, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(3, vocab, (shared,), generator=g).tolist()
    return [prefix + torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]
