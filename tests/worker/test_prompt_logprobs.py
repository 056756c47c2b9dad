"""SamplingParams(prompt_logprobs=k): every prompt token's log-probability given the tokens before it, as vLLM
V1 0.8.5 returns it (``RequestOutput.prompt_logprobs``: None first), computed chunk by chunk (§11.6).

Checked against HF transformers' log-softmax of the same positions (fp32, within 1e-4); chunked prefill
(including a chunk that ends just before the last prompt token) gives the same numbers as one whole prefill;
such a request never takes a prefix-cache hit (vLLM), and its batch neighbours' tokens do not change.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner
from minivllm.worker.model_runner import ModelRunner

TOL = 1e-4
K = 4


@pytest.fixture(scope="module")
def hf(smollm2):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(smollm2.hf_folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompt(smollm2):
    text = "Rome built roads and aqueducts across Europe; its law shaped the states that came after it. In short"
    ids = smollm2.tokenizer.encode(text)
    assert len(ids) > 17
    return ids


def run(loaded: Any, requests: list[tuple[list[int], SamplingParams]], **kwargs: Any) -> list[RequestOutput]:
    kwargs = {"num_gpu_blocks": 100, "max_num_seqs": 8, "max_model_len": 256, **kwargs}
    config = EngineConfig.from_kwargs(model=loaded.hf_folder, dtype="float32", device="cpu", **kwargs)
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i, (ids, params) in enumerate(requests):
        engine.add_request(str(i), ids, params)
        engine.step()  # one step apart: the second may find the first's blocks cached
    while engine.has_unfinished_requests():
        engine.step()
    return [engine.outputs[str(i)] for i in range(len(requests))]


def check(out: RequestOutput, prompt: list[int], ref: torch.Tensor, tokenizer: Any) -> None:
    plp = out.prompt_logprobs
    assert plp is not None and len(plp) == len(prompt) and plp[0] is None
    for token, position, row in zip(prompt[1:], plp[1:], ref):
        assert position is not None and token in position
        assert abs(position[token].logprob - row[token].item()) < TOL
        rank = position[token].rank
        assert rank is not None and int((row > row[token] + TOL).sum()) + 1 <= rank <= int(
            (row >= row[token] - TOL).sum()
        )
        top = sorted(position.values(), key=lambda lp: -lp.logprob)[:K]
        assert torch.allclose(torch.tensor([lp.logprob for lp in top]), row.topk(K).values, atol=TOL)
        for t, lp in position.items():
            assert abs(lp.logprob - row[t].item()) < TOL and lp.decoded_token == tokenizer.convert_ids_to_tokens([t])[0]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [512, 16, 7])
def test_prompt_logprobs_equal_hf_log_softmax_chunked_or_not(smollm2, hf, prompt, budget):
    p17 = prompt[:17]  # with budget 16: the first chunk ends just before the last prompt token
    chunked = {} if budget < 512 else {"enable_chunked_prefill": False}
    params = SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=K)
    outs = run(smollm2, [(prompt, params), (p17, params)], max_num_batched_tokens=budget, max_num_seqs=4, **chunked)
    with torch.inference_mode():
        ref = hf(torch.tensor([prompt])).logits[0, :-1].float().log_softmax(dim=-1)
    check(outs[0], prompt, ref, smollm2.tokenizer)
    check(outs[1], p17, ref[:16], smollm2.tokenizer)


@pytest.mark.slow
def test_prompt_logprobs_take_no_prefix_cache_hit_and_change_no_tokens(smollm2, prompt):
    plain = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    asking = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, prompt_logprobs=0, logprobs=0)
    base = run(smollm2, [(prompt, plain), (prompt, plain)], max_num_batched_tokens=32)
    mixed = run(smollm2, [(prompt, plain), (prompt, asking), (prompt, plain)], max_num_batched_tokens=32)
    assert base[1].num_cached_tokens and mixed[2].num_cached_tokens  # the plain ones hit the cache
    assert mixed[1].num_cached_tokens == 0
    assert [o.outputs[0].token_ids for o in mixed] == [base[0].outputs[0].token_ids] * 3
    plp = mixed[1].prompt_logprobs
    assert plp is not None and all(p is not None and list(p) == [t] for p, t in zip(plp[1:], prompt[1:]))
    assert base[0].prompt_logprobs is None and mixed[0].prompt_logprobs is None


@pytest.mark.slow
def test_prompt_logprobs_beyond_max_logprobs_are_refused(smollm2, prompt):
    with pytest.raises(ValueError, match=r"prompt_logprobs must be in \[0, 2\] \(max_logprobs=2"):
        run(smollm2, [(prompt, SamplingParams(prompt_logprobs=3))], max_logprobs=2)
    with pytest.raises(ValueError, match="prompt_logprobs must be None or non-negative, got -1"):
        SamplingParams(prompt_logprobs=-1)


def test_the_fake_runner_reports_its_point_mass():
    config = EngineConfig.from_kwargs(num_gpu_blocks=64, max_num_batched_tokens=8, max_num_seqs=4, max_model_len=128)
    runner = FakeModelRunner(vocab_size=100)
    engine = LLMEngine(config, model_runner=runner)
    prompt = [runner.true_token("r", p) if p % 2 else 5 for p in range(20)]  # odd positions: what it predicts
    engine.add_request("r", prompt, SamplingParams(max_tokens=3, prompt_logprobs=1, logprobs=1))
    while engine.has_unfinished_requests():
        engine.step()
    out = engine.outputs["r"]
    assert out.prompt_logprobs is not None and out.prompt_logprobs[0] is None
    for p, position in enumerate(out.prompt_logprobs[1:], start=1):
        assert position is not None and position[prompt[p]].logprob == (0.0 if p % 2 else float("-inf"))
    completion = out.outputs[0]
    assert completion.logprobs is not None and completion.cumulative_logprob == 0.0
    pairs = list(zip(completion.token_ids, completion.logprobs))
    assert all(list(p) == [t] and p[t].rank == 1 and p[t].logprob == 0.0 for t, p in pairs)


def test_preemption_and_recompute_give_the_same_prompt_logprobs(tiny):
    """A tiny KV pool preempts requests mid-prompt and after it; recomputing rewrites the same rows, and a
    table already sent is not sent again (each request's prompt_logprobs are those of a roomy run)."""

    def outputs(**kwargs: Any) -> tuple[list[RequestOutput], int]:
        config = EngineConfig.from_kwargs(model=tiny.hf_folder, device="cpu", max_model_len=128,
                                          max_num_seqs=4, **kwargs)  # fmt: skip
        engine = LLMEngine(config, model_runner=ModelRunner(config, tiny))
        for i in range(4):
            params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, prompt_logprobs=2, logprobs=1)
            engine.add_request(str(i), [3 + (7 * i + j) % 200 for j in range(40 + 5 * i)], params)
        while engine.has_unfinished_requests():
            engine.step()
        preempted = sum(len(s.preempted) for s in engine.trace.steps)
        return [engine.outputs[str(i)] for i in range(4)], preempted

    roomy, none = outputs(num_gpu_blocks=64, max_num_batched_tokens=64)
    tight, preempted = outputs(num_gpu_blocks=12, block_size=16, max_num_batched_tokens=24)
    assert none == 0 and preempted > 0
    for a, b in zip(roomy, tight):
        assert a.outputs[0].token_ids == b.outputs[0].token_ids
        assert a.prompt_logprobs is not None and b.prompt_logprobs is not None
        assert len(a.prompt_logprobs) == len(b.prompt_logprobs) == len(a.prompt_token_ids)
        for pa, pb in zip(a.prompt_logprobs[1:], b.prompt_logprobs[1:]):
            assert pa is not None and pb is not None
            assert sorted(x.logprob for x in pa.values()) == pytest.approx(sorted(x.logprob for x in pb.values()),
                                                                           abs=TOL)  # fmt: skip
