"""LLMEngine and LLM on a real (tiny) model: bad input, aborts, sampling, the trace (§11.4, §11.9)."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.engine.llm_engine import LLMEngine
from tests.helpers.tiny_engine import make_engine


def free_blocks(engine: LLMEngine) -> int:
    return engine.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()


@pytest.mark.parametrize("when", ["mid_prefill", "mid_decode"])
def test_abort_frees_every_block_and_the_others_finish(tiny, when):
    engine = make_engine(tiny)
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    engine.add_request("victim", list(range(3, 103)), params)  # 100 tokens: 4 steps of 32
    engine.add_request("other", list(range(3, 23)), params)
    engine.step()
    if when == "mid_decode":
        while engine.outputs["victim"].outputs[0].token_ids == []:
            engine.step()
    engine.abort_request("victim")
    assert engine.outputs["victim"].outputs[0].finish_reason == "abort"
    while engine.has_unfinished_requests():
        engine.step()
    assert (
        engine.outputs["other"].outputs[0].finish_reason == "length"
        and len(engine.outputs["other"].outputs[0].token_ids) == 8
    )
    assert free_blocks(engine) == 63


def test_bad_requests_get_clear_errors_while_the_others_finish(tiny):
    engine = make_engine(tiny)
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    engine.add_request("ok", [5, 6, 7], params)
    with pytest.raises(ValueError, match=r"longer than max_model_len \(256\)"):
        engine.add_request("long", [5] * 300, params)
    with pytest.raises(ValueError, match=r"token id 999 is out of range; allowed 0\.\.319"):
        engine.add_request("oov", [5, 999], params)
    with pytest.raises(ValueError, match="the prompt is empty"):
        engine.add_request("empty", [], params)
    with pytest.raises(ValueError, match="already in the scheduler"):
        engine.add_request("ok", [1], params)
    while engine.has_unfinished_requests():
        engine.step()
    assert len(engine.outputs["ok"].outputs[0].token_ids) == 4 and free_blocks(engine) == 63
    assert "long" not in engine.trace.requests


def test_engine_config_errors_name_the_parameter(tiny):
    with pytest.raises(ValueError, match=r"max_model_len \(4096\) is larger than the model's max_position_embeddings"):
        make_engine(tiny, max_model_len=4096)
    with pytest.raises(ValueError, match="attention backend 'flash_attn' cannot be used"):
        make_engine(tiny, attention_backend="flash_attn")
    with pytest.raises(ValueError, match="unknown attention backend 'fast'"):
        make_engine(tiny, attention_backend="fast")


def test_seeded_sampling_does_not_depend_on_the_batch(tiny):
    params = SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, top_k=50, seed=1234, ignore_eos=True)
    alone = make_engine(tiny)
    alone.add_request("x", [5, 6, 7, 8], params)
    while alone.has_unfinished_requests():
        alone.step()
    crowded = make_engine(tiny)
    crowded.add_request("noise", list(range(3, 60)), SamplingParams(max_tokens=10, temperature=1.0))
    crowded.add_request("x", [5, 6, 7, 8], params)
    while crowded.has_unfinished_requests():
        crowded.step()
    assert alone.outputs["x"].outputs[0].token_ids == crowded.outputs["x"].outputs[0].token_ids


def test_generation_stops_on_a_stop_token(tiny):
    engine = make_engine(tiny)
    engine.add_request("g", [5, 6, 7], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    tokens = engine.outputs["g"].outputs[0].token_ids
    engine.add_request("s", [5, 6, 7], SamplingParams(max_tokens=10, temperature=0.0, stop_token_ids=[tokens[3]]))
    while engine.has_unfinished_requests():
        engine.step()
    out = engine.outputs["s"].outputs[0]
    assert out.token_ids == tokens[: tokens.index(tokens[3]) + 1]
    assert (out.finish_reason, out.stop_reason) == ("stop", tokens[3])


def test_trace_records_prefill_chunks_decodes_and_token_times(tiny):
    engine = make_engine(tiny, max_num_batched_tokens=32)
    engine.add_request("a", list(range(3, 73)), SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    steps = engine.trace.steps
    assert [s.prefill_tokens.get("a", 0) for s in steps] == [32, 32, 6, 0, 0]
    assert [s.decode_tokens.get("a", 0) for s in steps] == [0, 0, 0, 1, 1]
    rec = engine.trace.requests["a"]
    assert rec.num_output_tokens == 3 and rec.finish_reason == "length"
    assert rec.token_times == [steps[2].end, steps[3].end, steps[4].end]
    assert rec.ttft > 0 and all(s.end >= s.start for s in steps)


def test_llm_generate_accepts_strings_and_token_ids(tiny):
    llm = LLM(
        tiny.hf_folder, device="cpu", max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64
    )
    params = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)
    by_text = llm.generate(["the cat sat", "hello world"], params, use_tqdm=False)
    ids = [o.prompt_token_ids for o in by_text]
    by_ids = llm.generate(ids, params, use_tqdm=True)
    assert [o.outputs[0].token_ids for o in by_text] == [o.outputs[0].token_ids for o in by_ids]
    assert all(o.finished and len(o.outputs[0].token_ids) == 5 for o in by_ids) and by_text[0].prompt == "the cat sat"
    with pytest.raises(ValueError, match="sampling_params: got 1 for 2 prompts"):
        llm.generate(ids, [params])
    assert not llm.engine.has_unfinished_requests()


def test_a_kv_cache_too_small_for_max_model_len_is_refused(tiny):
    with pytest.raises(ValueError, match=r"max_model_len \(256\) is larger than the number of tokens the KV cache"):
        make_engine(tiny, num_gpu_blocks=8)
