"""The main correctness test: greedy output equals HF transformers ``generate`` token for token,
whatever the scheduler does to the batch (§11.3-§11.6).

Chunk budgets, long_prefill_token_threshold, preemption and recomputation, prefix-cache hits
(including a fully cached prompt), mixed batches and block sizes 1 / 16 / 256 all change how the
tokens are batched and where their K/V live, never what is computed.
"""

from __future__ import annotations

import pytest

from minivllm.model.loader import load_model
from tests.helpers.engine_runs import run_engine
from tests.helpers.hf_reference import hf_greedy, make_prompts

NEW_TOKENS = 12


@pytest.fixture(scope="module")
def smollm2_case(smollm2):
    tok = smollm2.tokenizer
    text = (
        "The history of the Roman Empire spans many centuries, from the founding of the city to the fall of "
        "Constantinople. "
    )
    system = tok.encode(text * 6)  # a shared "system prompt" of ~150 tokens
    questions = [
        "Tell me about the aqueducts.",
        "Who was the first emperor?",
        "Why did the western half fall?",
        "Describe daily life in the city of Rome during the second century in some detail, please.",
    ]
    prompts = [system + tok.encode(q) for q in questions] + [tok.encode("Hello!"), system[:64]]
    return smollm2, prompts, hf_greedy(smollm2.hf_folder, prompts, NEW_TOKENS)


SCENARIOS = {
    "no_chunking": dict(enable_chunked_prefill=False, max_num_batched_tokens=1024, enable_prefix_caching=False),
    "budget_16": dict(max_num_batched_tokens=16),
    "budget_64_staggered": dict(max_num_batched_tokens=64, stagger=True),
    "budget_256": dict(max_num_batched_tokens=256),
    "threshold_40": dict(max_num_batched_tokens=256, long_prefill_token_threshold=40),
    "tiny_pool_preempts": dict(
        max_num_batched_tokens=128, long_prefill_token_threshold=32, num_gpu_blocks=16, max_model_len=240
    ),
    "block_size_1": dict(max_num_batched_tokens=96, block_size=1, num_gpu_blocks=3000),
    "block_size_256": dict(max_num_batched_tokens=512, block_size=256, num_gpu_blocks=12),
    # The default CPU GEMM is oneDNN with packed weights; PyTorch's own GEMM must agree as well.
    "budget_64_torch_gemm": dict(max_num_batched_tokens=64, cpu_gemm="torch"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_smollm2_greedy_equals_hf(smollm2_case, name):
    loaded, prompts, expected = smollm2_case
    got, trace = run_engine(loaded, prompts, NEW_TOKENS, **SCENARIOS[name])
    assert got == expected
    hits = sum(sum(s.prefix_cache_hit_tokens.values()) for s in trace.steps)
    preemptions = sum(len(s.preempted) for s in trace.steps)
    mixed = sum(1 for s in trace.steps if s.prefill_tokens and s.decode_tokens)
    if name == "tiny_pool_preempts":
        assert preemptions > 0
    if name in ("budget_16", "budget_256", "tiny_pool_preempts"):
        assert hits > 0  # the shared system prompt was found in the cache
    if name in ("budget_64_staggered", "tiny_pool_preempts", "threshold_40"):
        assert mixed > 0  # prompt chunks and decodes shared steps


@pytest.mark.slow
def test_fully_cached_prompt_equals_hf(smollm2_case):
    # The same prompt twice, one after the other: the second is a full hit except its last block.
    loaded, prompts, expected = smollm2_case
    prompt = prompts[0][:128]  # exactly 8 blocks of 16
    (ref,) = hf_greedy(loaded.hf_folder, [prompt], NEW_TOKENS)
    got, trace = run_engine(loaded, [prompt, prompt], NEW_TOKENS, max_num_batched_tokens=256, stagger=True)
    assert got == [ref, ref]
    assert trace.requests["1"].num_cached_tokens == 112  # 7 of 8 blocks: the last-token rule


@pytest.fixture(scope="module")
def qwen2_case(tiny_qwen2):
    loaded = load_model(tiny_qwen2)
    prompts = make_prompts(loaded.arch.vocab_size, [5, 40, 77, 130, 1, 64], shared=48)
    return loaded, prompts, hf_greedy(tiny_qwen2, prompts, NEW_TOKENS)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_tiny_qwen2_greedy_equals_hf(qwen2_case, name):
    loaded, prompts, expected = qwen2_case
    got, _ = run_engine(loaded, prompts, NEW_TOKENS, **SCENARIOS[name])
    assert got == expected
