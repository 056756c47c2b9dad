"""``LLM`` as vLLM's offline API (§11.9): vLLM's prompt forms, per-prompt SamplingParams, ``RequestOutput`` /
``CompletionOutput`` with metrics and prefix-cache hits, ``chat`` with ``chat_template`` / ``add_generation_prompt``
/ ``continue_final_message``, ``get_tokenizer``; bad input refused with a message naming the argument."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.outputs import CompletionOutput, RequestMetrics, RequestOutput

GREEDY = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def llm(tiny_qwen2):
    return LLM(model=tiny_qwen2, max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)


def test_every_prompt_form_gives_the_same_tokens(llm):
    ids = llm.get_tokenizer().encode("the cat sat on the mat")
    forms = ["the cat sat on the mat", {"prompt": "the cat sat on the mat"}, {"prompt_token_ids": ids}, ids]
    outs = llm.generate(forms, GREEDY, use_tqdm=False)
    assert len({tuple(o.outputs[0].token_ids) for o in outs}) == 1 and len(outs[0].outputs[0].token_ids) == 5
    assert [o.prompt for o in outs] == ["the cat sat on the mat"] * 2 + [None, None]  # vLLM: no text for token ids
    assert all(o.prompt_token_ids == ids for o in outs)
    for single in forms:  # one prompt, in any form, is a list of one output
        (one,) = llm.generate(single, GREEDY, use_tqdm=False)
        assert one.outputs[0].token_ids == outs[0].outputs[0].token_ids


def test_request_output_has_vllms_shape(llm):
    first, again = llm.generate(["hello world, the dog ran far and the cat"] * 2, GREEDY, use_tqdm=False)
    assert isinstance(first, RequestOutput) and first.finished and first.prompt_logprobs is None
    (c,) = first.outputs
    assert isinstance(c, CompletionOutput) and c.index == 0 and c.finished()
    assert (c.finish_reason, c.stop_reason, c.cumulative_logprob, c.logprobs) == ("length", None, None, None)
    assert isinstance(c.text, str) and len(c.token_ids) == 5
    m = first.metrics
    assert isinstance(m, RequestMetrics)
    assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.last_token_time <= m.finished_time
    assert m.time_in_queue == pytest.approx(m.first_scheduled_time - m.arrival_time)
    # The same prompt again, later: its full blocks come from the prefix cache (16-token blocks).
    (later,) = llm.generate("hello world, the dog ran far and the cat", GREEDY, use_tqdm=False)
    n = len(later.prompt_token_ids)
    assert first.num_cached_tokens == 0 and later.num_cached_tokens == (n - 1) // 16 * 16
    assert later.outputs[0].token_ids == c.token_ids and again.outputs[0].token_ids == c.token_ids


def test_one_sampling_params_per_prompt(llm):
    params = [SamplingParams(max_tokens=k, temperature=0.0, ignore_eos=True) for k in (2, 7)]
    outs = llm.generate(["the cat", "the dog"], params, use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in outs] == [2, 7]
    with pytest.raises(ValueError, match=r"sampling_params: got 1 for 2 prompts"):
        llm.generate(["the cat", "the dog"], params[:1], use_tqdm=False)


@pytest.mark.parametrize(
    "prompt, words",
    [
        ({"prompt": "x", "prompt_token_ids": [1]}, r"prompts\[0\]: a prompt dict needs exactly one of"),
        ({"text": "x"}, r"prompts\[0\]: unsupported key 'text'"),
        (["the cat", 3.5], r"prompts\[1\] must be a str, a list of token ids"),
        ([[1, "a"]], r"prompts\[0\] must be a str"),
    ],
)
def test_a_bad_prompt_is_refused_naming_it(llm, prompt, words):
    with pytest.raises(ValueError, match=words):
        llm.generate(prompt, GREEDY, use_tqdm=False)
    assert not llm.engine.has_unfinished_requests()


TEMPLATE = (  # the tiny model's tokenizer has no template of its own; this one honours add_generation_prompt
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def test_chat_takes_vllms_template_arguments(llm):
    conversation = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "the cat"}]
    (new_turn,) = llm.chat(conversation, GREEDY, use_tqdm=False, chat_template=TEMPLATE)
    assert new_turn.prompt == "user: hello\nassistant: the cat\nassistant:"
    (closed,) = llm.chat(conversation, GREEDY, use_tqdm=False, chat_template=TEMPLATE, add_generation_prompt=False)
    assert closed.prompt == "user: hello\nassistant: the cat\n"
    (going_on,) = llm.chat(
        conversation, GREEDY, use_tqdm=False, chat_template=TEMPLATE, add_generation_prompt=False,
        continue_final_message=True,
    )  # fmt: skip
    assert going_on.prompt == "user: hello\nassistant: the cat"  # the model continues the assistant's message
    two = llm.chat([conversation, conversation[:1]], GREEDY, use_tqdm=False, chat_template=TEMPLATE)
    assert len(two) == 2 and two[0].outputs[0].token_ids == new_turn.outputs[0].token_ids
    assert two[1].prompt == "user: hello\nassistant:"
    with pytest.raises(ValueError, match="continue_final_message and add_generation_prompt"):
        llm.chat(conversation, GREEDY, use_tqdm=False, chat_template=TEMPLATE, continue_final_message=True)
    assert llm.get_tokenizer() is llm.tokenizer


def test_speculative_config_as_vllm_spells_it(tiny_qwen2):
    kw = dict(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}
    llm = LLM(model=tiny_qwen2, speculative_config=spec, **kw)
    sc = llm.engine.config.speculative_config
    assert (sc.num_speculative_tokens, sc.prompt_lookup_max, sc.prompt_lookup_min) == (3, 2, 1)
    plain = LLM(model=tiny_qwen2, **kw)
    prompt = [5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6]  # repeats: prompt lookup finds drafts
    same = [x.generate([prompt], GREEDY, use_tqdm=False)[0].outputs[0].token_ids for x in (llm, plain)]
    assert same[0] == same[1]  # drafts verified by the model change nothing under greedy sampling
    assert any(step.spec_tokens for step in llm.engine.trace.steps)  # and drafts were proposed
    with pytest.raises(ValueError, match="method must be 'ngram'"):
        LLM(model=tiny_qwen2, speculative_config={"method": "eagle", "num_speculative_tokens": 2}, **kw)
    with pytest.raises(ValueError, match="unsupported key 'model'"):
        LLM(model=tiny_qwen2, speculative_config={"model": "x", "num_speculative_tokens": 2}, **kw)
    with pytest.raises(ValueError, match="Unknown engine argument 'tensor_parallel_sizes'"):
        LLM(model=tiny_qwen2, tensor_parallel_sizes=1, **kw)
