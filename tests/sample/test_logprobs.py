"""SamplingParams(logprobs=k): each generated token's log-probability and the top k, as vLLM V1 0.8.5.

The numbers are checked against HF transformers: the log-softmax of the fp32 logits HF computes at the same
positions (the prompt plus the tokens generated so far), within 1e-4, greedy and sampled (seeded; at
temperature 0.7, top-k and top-p, which vLLM V1 does not apply to logprobs: they are the raw model's). Ties
and near-ties are compared with a tolerance, never by exact float bits or by which of two equal ids comes first.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.outputs import CompletionOutput
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

TOL = 1e-4
GREEDY = dict(temperature=0.0)
SAMPLED = dict(temperature=0.7, top_k=40, top_p=0.9, seed=1234)


@pytest.fixture(scope="module")
def hf(smollm2):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(smollm2.hf_folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompts(smollm2):
    tok = smollm2.tokenizer
    long = "The Roman Empire built roads, aqueducts and cities across Europe, and its law shaped later states. "
    return [tok.encode("The capital of France is"), tok.encode(long * 2 + "In short,")]


def run(loaded: Any, requests: list[tuple[list[int], SamplingParams]], **kwargs: Any) -> list[CompletionOutput]:
    """Every request through one engine, all added at step 0; their completions, in order."""
    kwargs = {"num_gpu_blocks": 200, "max_num_seqs": 8, "max_model_len": 512, **kwargs}
    config = EngineConfig.from_kwargs(model=loaded.hf_folder, dtype="float32", device="cpu", **kwargs)
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i, (ids, params) in enumerate(requests):
        engine.add_request(str(i), ids, params)
    while engine.has_unfinished_requests():
        engine.step()
    return [engine.outputs[str(i)].outputs[0] for i in range(len(requests))]


def hf_logprobs(hf: Any, prompt: list[int], output: list[int]) -> torch.Tensor:
    """HF's log-softmax at the positions that predicted each output token: [len(output), vocab]."""
    with torch.inference_mode():
        logits = hf(torch.tensor([prompt + output])).logits[0].float()
    return logits[len(prompt) - 1 : len(prompt) + len(output) - 1].log_softmax(dim=-1)


def check_against_hf(out: CompletionOutput, expected: torch.Tensor, k: int, tokenizer: Any) -> None:
    """Each position's dict against HF's log-softmax row ``expected[i]``: the sampled token's value and rank, the
    top k values (in order, as values: which of two tied ids is listed may differ), ranks 1..k, token strings."""
    assert out.logprobs is not None and len(out.logprobs) == len(out.token_ids) == expected.shape[0]
    for token, position, ref in zip(out.token_ids, out.logprobs, expected):
        sampled = position[token]
        # rank: 1 + the tokens more likely than the sampled one (a near-tie may count either way)
        assert sampled.rank is not None
        assert int((ref > ref[token] + TOL).sum()) + 1 <= sampled.rank <= int((ref >= ref[token] - TOL).sum())
        for t, lp in position.items():  # every listed id's value is HF's
            assert abs(lp.logprob - ref[t].item()) < TOL
            assert lp.decoded_token == tokenizer.convert_ids_to_tokens([t])[0]
        ref_top = ref.topk(k).values
        top = sorted((lp.logprob for lp in position.values()), reverse=True)[:k]
        assert torch.allclose(torch.tensor(top), ref_top, atol=TOL)  # the k largest values are listed
        assert set(range(1, k + 1)) <= {lp.rank for lp in position.values()}
        # the sampled token plus the top k, one entry less when it is one of them (ties: either count)
        assert len(position) in ((k, k + 1) if abs(ref_top[-1] - ref[token]) < TOL else (k + (sampled.rank > k),))
    assert out.cumulative_logprob == pytest.approx(sum(p[t].logprob for t, p in zip(out.token_ids, out.logprobs)))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["greedy", "sampled"])
def test_logprobs_equal_hf_log_softmax(smollm2, hf, prompts, how):
    extra = GREEDY if how == "greedy" else SAMPLED
    params = SamplingParams(max_tokens=8, ignore_eos=True, logprobs=5, **extra)
    outs = run(smollm2, [(p, params) for p in prompts])
    for prompt, out in zip(prompts, outs):
        check_against_hf(out, hf_logprobs(hf, prompt, out.token_ids), 5, smollm2.tokenizer)
        if how == "greedy":
            assert all(p[t].rank == 1 or p[t].logprob >= max(x.logprob for x in p.values()) - TOL
                       for t, p in zip(out.token_ids, out.logprobs))  # fmt: skip


@pytest.mark.slow
def test_logprobs_zero_gives_the_sampled_token_only(smollm2, hf, prompts):
    out = run(smollm2, [(prompts[0], SamplingParams(max_tokens=6, ignore_eos=True, logprobs=0, **SAMPLED))])[0]
    assert out.logprobs is not None and [list(p) for p in out.logprobs] == [[t] for t in out.token_ids]
    ref = hf_logprobs(hf, prompts[0], out.token_ids)
    for token, position, row in zip(out.token_ids, out.logprobs, ref):
        assert abs(position[token].logprob - row[token].item()) < TOL
        assert int((row > row[token] + TOL).sum()) + 1 <= position[token].rank <= int((row >= row[token] - TOL).sum())


@pytest.mark.slow
def test_chunked_prefill_gives_the_same_logprobs(smollm2, prompts):
    params = SamplingParams(max_tokens=6, ignore_eos=True, logprobs=3, **GREEDY)
    whole = run(smollm2, [(p, params) for p in prompts], enable_chunked_prefill=False, max_num_batched_tokens=512)
    chunked = run(smollm2, [(p, params) for p in prompts], max_num_batched_tokens=16)
    for a, b in zip(whole, chunked):
        assert a.token_ids == b.token_ids and a.logprobs is not None and b.logprobs is not None
        for pa, pb in zip(a.logprobs, b.logprobs):
            for t in set(pa) & set(pb):
                assert abs(pa[t].logprob - pb[t].logprob) < TOL
            assert sorted(x.logprob for x in pa.values()) == pytest.approx(
                sorted(x.logprob for x in pb.values()), abs=TOL
            )


@pytest.mark.slow
@pytest.mark.parametrize("how", ["greedy", "sampled"])
def test_a_request_with_logprobs_changes_no_tokens_in_its_batch(smollm2, prompts, how):
    extra = GREEDY if how == "greedy" else SAMPLED

    def batch(logprobs_of_second: int | None) -> list[tuple[list[int], SamplingParams]]:
        return [
            (p, SamplingParams(max_tokens=8, ignore_eos=True, **{**extra, "seed": 7 + i},
                               logprobs=logprobs_of_second if i == 1 else None))
            for i, p in enumerate(prompts * 2)
        ]  # fmt: skip

    base = run(smollm2, batch(None), max_num_batched_tokens=32)
    with_logprobs = run(smollm2, batch(2), max_num_batched_tokens=32)
    assert [o.token_ids for o in with_logprobs] == [o.token_ids for o in base]
    assert [o.logprobs is not None for o in with_logprobs] == [False, True, False, False]
    assert [o.cumulative_logprob is None for o in with_logprobs] == [True, False, True, True]


@pytest.mark.slow
def test_logprobs_are_taken_before_min_tokens(smollm2, prompts):
    """min_tokens bans EOS from sampling, not from the logprobs: the raw model's distribution (vLLM V1)."""
    eos = smollm2.eos_token_id
    params = SamplingParams(max_tokens=3, min_tokens=3, logprobs=20, **GREEDY)
    out = run(smollm2, [(prompts[0], params)])[0]
    assert out.logprobs is not None and eos not in out.token_ids
    banned = [p[eos].logprob for p in out.logprobs if eos in p]
    assert all(math.isfinite(lp) for lp in banned)


@pytest.mark.slow
def test_speculative_decoding_skips_drafts_for_requests_with_logprobs(smollm2, prompts):
    repeat = smollm2.tokenizer.encode("one two three four one two three four one two three")
    params = SamplingParams(max_tokens=8, ignore_eos=True, logprobs=1, **GREEDY)
    spec = run(smollm2, [(repeat, params), (repeat, SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY))],
               num_speculative_tokens=3)  # fmt: skip
    plain = run(smollm2, [(repeat, params)])[0]
    assert spec[0].token_ids == plain.token_ids == spec[1].token_ids
    assert spec[0].logprobs is not None and len(spec[0].logprobs) == len(spec[0].token_ids)
    for a, b in zip(spec[0].logprobs, plain.logprobs or []):
        assert a.keys() == b.keys() or abs(sorted(a.values(), key=lambda x: x.logprob)[0].logprob) < TOL


@pytest.mark.slow
def test_logprobs_beyond_max_logprobs_are_refused_naming_the_range(smollm2, prompts):
    kwargs = dict(dtype="float32", device="cpu", num_gpu_blocks=16, max_model_len=128, max_logprobs=4)
    config = EngineConfig.from_kwargs(model=smollm2.hf_folder, **kwargs)
    engine = LLMEngine(config, model_runner=ModelRunner(config, smollm2))
    with pytest.raises(ValueError, match=r"logprobs must be in \[0, 4\] \(max_logprobs=4"):
        engine.add_request("a", prompts[0], SamplingParams(logprobs=5))
    assert not engine.has_unfinished_requests()
    engine.add_request("b", prompts[0], SamplingParams(max_tokens=1, logprobs=4))
    with pytest.raises(ValueError, match="max_logprobs must be >= 0"):
        EngineConfig.from_kwargs(model=smollm2.hf_folder, max_logprobs=-1)


def test_no_log_softmax_unless_a_request_asks(tiny, monkeypatch):
    """The common path computes nothing for logprobs: Sampler.compute_logprobs is never called, and the
    runner's output carries none."""
    from minivllm.sample.sampler import Sampler

    def refuse(logits: torch.Tensor) -> torch.Tensor:
        raise AssertionError("log_softmax computed although no request asked for logprobs")

    monkeypatch.setattr(Sampler, "compute_logprobs", staticmethod(refuse))
    config = EngineConfig.from_kwargs(model=tiny.hf_folder, device="cpu", num_gpu_blocks=64, max_model_len=128,
                                      max_num_batched_tokens=16, max_num_seqs=4)  # fmt: skip
    runner = ModelRunner(config, tiny)
    outputs = []
    real = runner.execute_model
    monkeypatch.setattr(runner, "execute_model", lambda out: outputs.append(real(out)) or outputs[-1])
    engine = LLMEngine(config, model_runner=runner)
    for i in range(3):
        params = SamplingParams(max_tokens=4, ignore_eos=True, **(GREEDY if i else SAMPLED))
        engine.add_request(str(i), list(range(3, 30 + i)), params)
    while engine.has_unfinished_requests():
        engine.step()
    assert outputs and all(o.logprobs is None and not o.prompt_logprobs_dict for o in outputs)
    completions = [engine.outputs[str(i)].outputs[0] for i in range(3)]
    assert all(c.logprobs is None and c.finish_reason == "length" for c in completions)  # no step failed
