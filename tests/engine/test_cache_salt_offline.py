"""cache_salt on the offline API (vLLM 0.9+): ``LLM.generate`` prompt dicts and ``LLMEngine.add_request``.
Prefix-cache hits are shared within a salt only, and the tokens do not depend on the salt (§11.5)."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers.tiny_engine import make_engine

GREEDY = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
PROMPT = [3 + t % 50 for t in range(70)]  # 4 full blocks of 16


@pytest.fixture(scope="module")
def llm(tiny_qwen2):
    return LLM(model=tiny_qwen2, max_num_batched_tokens=128, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)


def test_generate_shares_the_prefix_cache_within_a_salt_only(llm):
    def run(salt):
        prompt = {"prompt_token_ids": PROMPT} if salt is None else {"prompt_token_ids": PROMPT, "cache_salt": salt}
        (out,) = llm.generate(prompt, GREEDY, use_tqdm=False)
        return out

    first = run("alice")
    other, plain, again = run("bob"), run(None), run("alice")
    assert (first.num_cached_tokens, other.num_cached_tokens, plain.num_cached_tokens) == (0, 0, 0)
    assert again.num_cached_tokens == 64
    assert len({tuple(o.outputs[0].token_ids) for o in (first, other, plain, again)}) == 1


@pytest.mark.parametrize("salt", ["", 7, ["a"]])
def test_a_bad_salt_is_refused_naming_it(llm, salt):
    with pytest.raises(ValueError, match=r"prompts\[1\]: cache_salt must be a non-empty string"):
        llm.generate([{"prompt": "hi"}, {"prompt": "hi", "cache_salt": salt}], GREEDY, use_tqdm=False)
    assert not llm.engine.has_unfinished_requests()


def test_add_request_takes_a_salt(tiny):
    engine = make_engine(tiny, max_num_batched_tokens=128)
    with pytest.raises(ValueError, match="cache_salt must be a non-empty string"):
        engine.add_request("bad", PROMPT, GREEDY, cache_salt="")
    engine.add_request("a", PROMPT, GREEDY, cache_salt="t1")
    while engine.has_unfinished_requests():
        engine.step()
    engine.add_request("b", PROMPT, GREEDY, cache_salt="t2")
    engine.add_request("c", PROMPT, GREEDY, cache_salt="t1")
    while engine.has_unfinished_requests():
        engine.step()
    assert [engine.outputs[r].num_cached_tokens for r in "abc"] == [0, 0, 64]
