"""bfloat16 on the torch path, the engine's default dtype on CUDA (config.resolve_auto_dtype), run here.

bf16 rounds differently from HF's op order, so exact token equality is not the contract: each token the
engine picks must be HF bfloat16's greedy choice on the same prefix (teacher-forced), or a near-tie whose
logit is within bf16 rounding of the top one. Chunked prompts and mixed steps included, both CPU GEMMs.
"""

from __future__ import annotations

import pytest
import torch

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner
from tests.helpers.hf_reference import make_prompts

NEAR_TIE = 0.125  # logits here are O(1); bf16 keeps 8 bits of mantissa, rounding adds up over layers


@pytest.mark.parametrize("kind", ["tiny_llama", "tiny_qwen2"])
@pytest.mark.parametrize("cpu_gemm", ["auto", "torch"])
def test_bf16_engine_follows_hf_bf16_greedy(request, kind, cpu_gemm):
    from transformers import AutoModelForCausalLM

    folder = request.getfixturevalue(kind)
    loaded = load_model(folder, "bfloat16")
    prompts = make_prompts(loaded.arch.vocab_size, [5, 40, 77, 130, 1], shared=48)
    config = EngineConfig.from_kwargs(
        model=folder, dtype="bfloat16", device="cpu", num_gpu_blocks=120, max_num_batched_tokens=32,
        max_num_seqs=8, max_model_len=256, cpu_gemm=cpu_gemm,
    )  # fmt: skip
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    assert engine.model_runner.kv_caches.dtype == torch.bfloat16
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert any(s.prefill_tokens and s.decode_tokens for s in engine.trace.steps)  # mixed steps ran
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
    for i, prompt in enumerate(prompts):
        tokens = engine.outputs[str(i)].outputs[0].token_ids
        with torch.no_grad():
            logits = hf(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].float()
        margins = logits.max(dim=-1).values - logits[torch.arange(len(tokens)), torch.tensor(tokens)]
        assert margins.max().item() <= NEAR_TIE, (i, tokens, logits.argmax(-1).tolist(), margins.tolist())
