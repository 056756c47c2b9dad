"""Speculative decoding with the n-gram proposer (§11.8.2): same greedy output, fewer steps."""

from __future__ import annotations

import pytest
import torch

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.metrics.summary import summarize
from minivllm.model.loader import load_model
from minivllm.sample.rejection_sampler import verify_drafts
from minivllm.sampling_params import SamplingParams
from minivllm.spec_decode.ngram_proposer import NgramProposer, find_first
from minivllm.worker.model_runner import ModelRunner
from tests.helpers.hf_reference import hf_greedy


def test_ngram_proposer_longest_match_first():
    p = NgramProposer(num_speculative_tokens=3, prompt_lookup_max=3, prompt_lookup_min=1)
    assert p.propose([1, 2, 3, 4, 5, 1, 2, 3]) == [4, 5, 1]  # "1 2 3" seen at 0: propose what followed
    assert p.propose([7, 8, 9, 7]) == [8, 9, 7]  # only the 1-gram "7" matches
    assert p.propose([1, 2, 3]) == []  # nothing repeats
    assert NgramProposer(2, 2, 2).propose([5, 6, 9, 9, 5, 6]) == [9, 9]
    assert find_first([1, 2, 1, 2], [1, 2], end=3) == 0 and find_first([1, 2], [3], end=2) is None


def test_greedy_verification_accepts_the_matching_prefix():
    logits = torch.full((4, 10), -5.0)
    for row, tok in enumerate([3, 4, 7, 1]):
        logits[row, tok] = 5.0
    greedy = SamplingParams(temperature=0.0)
    assert verify_drafts(logits, [3, 4, 9], greedy, None) == [3, 4, 7]  # third draft wrong: target's 7
    assert verify_drafts(logits, [3, 4, 7], greedy, None) == [3, 4, 7, 1]  # all right + bonus token
    assert verify_drafts(logits, [0, 4, 7], greedy, None) == [3]


def test_sampled_verification_keeps_the_target_distribution():
    # Target p = [0.5, 0.3, 0.2]; a draft of token 0 is accepted half the time, and the first
    # token's distribution over many draws must still be p.
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]))
    params = SamplingParams(temperature=1.0)
    g = torch.Generator().manual_seed(0)
    firsts = torch.tensor([verify_drafts(logits, [0], params, g)[0] for _ in range(4000)])
    freq = torch.bincount(firsts, minlength=3).float() / len(firsts)
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2]), atol=0.03)


@pytest.fixture(scope="module")
def repetitive(smollm2):
    tok = smollm2.tokenizer
    quote = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. "
    prompts = [tok.encode(f"Repeat this text exactly three times.\n{quote}\n{quote}\n") for _ in range(1)]
    prompts.append(tok.encode("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"))
    return smollm2, prompts, hf_greedy(smollm2.hf_folder, prompts, 24)


@pytest.mark.slow
@pytest.mark.parametrize("budget", [256, 40])
def test_greedy_with_speculation_equals_greedy_without(repetitive, budget):
    loaded, prompts, expected = repetitive
    config = EngineConfig.from_kwargs(
        model=loaded.hf_folder,
        device="cpu",
        max_num_batched_tokens=budget,
        max_num_seqs=4,
        max_model_len=1024,
        num_gpu_blocks=200,
        num_speculative_tokens=4,
        prompt_lookup_max=3,
        prompt_lookup_min=1,
    )
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))] == expected
    drafted = sum(sum(s.spec_tokens.values()) for s in engine.trace.steps)
    accepted = sum(sum(s.spec_accepted.values()) for s in engine.trace.steps)
    assert drafted > 0 and 0 < accepted <= drafted
    assert summarize(engine.trace).spec_acceptance_rate == accepted / drafted
    decode_steps = sum(1 for s in engine.trace.steps if s.decode_tokens or s.spec_tokens)
    assert decode_steps < 2 * 23  # fewer steps than one token per step per request


def test_spec_decode_on_a_tiny_model_matches_plain_greedy(tiny_qwen2):
    loaded = load_model(tiny_qwen2)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7]

    def run(k):
        config = EngineConfig.from_kwargs(
            model=tiny_qwen2,
            device="cpu",
            max_num_batched_tokens=64,
            max_num_seqs=4,
            max_model_len=256,
            num_gpu_blocks=64,
            num_speculative_tokens=k,
        )
        engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
        engine.add_request("r", prompt, SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True))
        engine.add_request("s", prompt[:5], SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
        free = engine.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        return [engine.outputs[r].outputs[0].token_ids for r in "rs"], free

    assert run(3) == run(0)
