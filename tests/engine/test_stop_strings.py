"""Stop strings (§11.9, vLLM V1's detokenizer check): the text is cut where the stop string begins (or after it),
finish_reason "stop" with the string as stop_reason, the request's blocks are freed at once, and the other requests
of the batch keep their exact tokens."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.engine.stop_strings import StopStringChecker


def test_the_checker_finds_stop_strings_across_checks_in_vllms_list_order():
    c = StopStringChecker(["END", "xy"])
    assert c.check("hello E") is None and c.check("hello EN") is None
    assert c.check("hello ENDxy") == ("hello ", "END")  # "END" straddles the previous checks
    # Two stop strings complete in one step: vLLM's check_stop_strings returns the first of the list that is
    # found, not the one that starts earliest in the text.
    assert StopStringChecker(["b", "ab"], include_in_output=True).check("zzab") == ("zzab", "b")
    assert StopStringChecker(["b", "ab"]).check("zzab") == ("zza", "b")
    assert StopStringChecker(["ab", "b"]).check("zzab") == ("zz", "ab")
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


def test_a_stop_string_is_matched_on_whole_characters_only():
    """Issue 30, finding 8: the decode of a half-done UTF-8 character ends in U+FFFD, and the stop string
    "\\ufffd" matched it and stopped the request early. Now the unfinished end waits for its last bytes."""
    c = StopStringChecker(["\ufffd"])
    assert c.check("ab\ufffd") is None  # "é" half decoded
    assert c.check("abé") is None and c.check("abé d") is None
    assert c.check("abé d\ufffd\ufffd") is None
    assert c.check("abé d\ufffd\ufffd", finished=True) == ("abé d", "\ufffd")  # the text ended there: it counts
    real = StopStringChecker(["\ufffd"])
    assert real.check("x\ufffdy") == ("x", "\ufffd")  # a real U+FFFD inside the text still matches


def test_each_check_searches_only_what_the_new_text_can_complete():
    """A stop string that ended before the last check's window is not found again, and the window begins
    len(stop) - 1 characters before the new text (vLLM's check_stop_strings)."""
    c = StopStringChecker(["abc", "z"])
    assert c.check("xxab") is None
    assert c.check("xxabc") == ("xx", "abc")  # straddles the checks
    c = StopStringChecker(["abc"])
    c.checked = 10  # as if the first 10 characters were searched
    assert c.check("abc" + "-" * 7 + "q") is None  # "abc" lies wholly before the window


def test_stop_strings_and_ids_are_bounded_by_count_not_by_the_text():
    """Per-step stop checks: stop token ids as a set (O(1) per token), stop strings over a window."""
    from minivllm.request import Request, check_stop

    params = SamplingParams(max_tokens=8, stop_token_ids=list(range(100, 100_100)), ignore_eos=True)

    class NoScan(list):
        def __contains__(self, item):
            raise AssertionError("check_stop scanned the stop_token_ids list")

    params.stop_token_ids = NoScan(params.stop_token_ids)
    req = Request("r", [1, 2], params, eos_token_id=0)
    req.append_output_token_ids(100_050)
    assert check_stop(req, 256) and req.stop_reason == 100_050


@pytest.mark.slow
def test_a_step_decodes_only_the_new_tokens_of_a_request_with_stop_strings(llm):
    """Issue 30: the whole completion was decoded after every step of a request with stop strings (O(text) per
    step, O(text^2) in all); now an incremental detokenizer decodes a window of a few tokens per step."""
    processor = llm.engine.output_processor
    sizes: list[int] = []

    class Counting:
        def __init__(self, tok):
            self.tok = tok

        def decode(self, ids, **kw):
            sizes.append(len(ids))
            return self.tok.decode(ids, **kw)

    processor.tokenizer = Counting(processor.tokenizer)
    params = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True, stop=["\x00never"])
    (out,) = llm.generate(["The capital of France is"], params, use_tqdm=False)
    plain = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)
    (ref,) = llm.generate(["The capital of France is"], plain, use_tqdm=False)
    processor.tokenizer = processor.tokenizer.tok
    assert out.outputs[0].token_ids == ref.outputs[0].token_ids and out.outputs[0].text == ref.outputs[0].text
    assert len(out.outputs[0].token_ids) == 64 and max(sizes[:-1]) <= 8, sizes  # the last: ref's one full decode
