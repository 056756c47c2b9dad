"""Stop strings (§11.9, vLLM V1's detokenizer check): the text is cut where the stop string begins (or after it),
finish_reason "stop" with the string as stop_reason, the request's blocks are freed at once, and the other requests
of the batch keep their exact tokens."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.engine.stop_strings import StopStringChecker


def test_the_checker_finds_the_earliest_stop_string_even_across_checks():
    c = StopStringChecker(["END", "xy"])
    assert c.check("hello E") is None and c.check("hello EN") is None
    assert c.check("hello ENDxy") == ("hello ", "END")  # "END" straddles the previous checks
    c = StopStringChecker(["b", "ab"], include_in_output=True)
    assert c.check("zzab") == ("zzab", "ab")  # "ab" starts first
    assert StopStringChecker(["q"]).check("abc") is None


KW = dict(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)


@pytest.fixture(scope="module")
def llm(smollm2):
    """SmolLM2 (real text to put stop strings in), on the session's loaded weights."""
    from minivllm.config import EngineConfig
    from minivllm.worker.model_runner import ModelRunner

    return LLM("smollm2", model_runner=ModelRunner(EngineConfig.from_kwargs(model="smollm2", **KW), smollm2), **KW)


def free_blocks(llm) -> int:
    return llm.engine.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()


@pytest.mark.slow
def test_a_stop_string_cuts_the_text_and_frees_the_request(llm):
    greedy = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    prompts = ["The capital of France is", "Photosynthesis is the process"]
    full = [o.outputs[0] for o in llm.generate(prompts, greedy, use_tqdm=False)]
    text = full[0].text
    words = text.split()
    stop = " " + words[len(words) // 2]  # a word in the middle of the greedy answer
    assert text.find(stop) > 0, text
    params = [SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True, stop=[stop, "\x00never"]), greedy]
    cut, other = (o.outputs[0] for o in llm.generate(prompts, params, use_tqdm=False))
    assert (cut.text, cut.finish_reason, cut.stop_reason) == (text[: text.find(stop)], "stop", stop)
    assert cut.token_ids == full[0].token_ids[: len(cut.token_ids)] and len(cut.token_ids) < 24
    assert llm.get_tokenizer().decode(cut.token_ids, skip_special_tokens=True).find(stop) >= 0  # the last token
    assert other.token_ids == full[1].token_ids and other.finish_reason == "length"  # its neighbour: untouched
    assert free_blocks(llm) == 63 and not llm.engine.has_unfinished_requests()
    trace = llm.engine.trace.requests
    assert trace[max(trace, key=int)].finish_reason == "length"  # the trace saw the stop as a finish, too
    assert trace[str(int(max(trace, key=int)) - 1)].finish_reason == "stop"

    kept = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True, stop=stop, include_stop_str_in_output=True)
    (with_stop,) = llm.generate(prompts[:1], kept, use_tqdm=False)
    assert with_stop.outputs[0].text == text[: text.find(stop) + len(stop)]


def test_stop_strings_need_a_tokenizer(tiny_qwen2):
    from minivllm.engine.llm_engine import LLMEngine

    llm = LLM(model=tiny_qwen2, **KW)
    engine: LLMEngine = llm.engine
    engine.tokenizer = None
    with pytest.raises(ValueError, match="stop strings need a tokenizer"):
        engine.add_request("r", [5, 6, 7], SamplingParams(stop=["x"]))
    assert not engine.has_unfinished_requests()
