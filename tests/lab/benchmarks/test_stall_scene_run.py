"""§11.1's scene on a tiny CPU engine (benchmarks/stall_scene_run.py): unchunked, one step holds the whole
prompt and every chat; chunked, the prompt rides along in budget-sized chunks while every chat decodes."""

from __future__ import annotations

import pytest

from minivllm.lab.benchmarks.stall_scene_run import LONG_ID, run_scene

LONG, BUDGET, CHATS = 200, 48, 4


@pytest.fixture(scope="module")
def make_engine(tiny):
    from minivllm import EngineConfig, LLMEngine
    from minivllm.worker.model_runner import ModelRunner

    def make(**settings):
        config = EngineConfig.from_kwargs(model=tiny.hf_folder, device="cpu", dtype="float32", **settings)
        return LLMEngine(config, model_runner=ModelRunner(config, tiny))

    return make


@pytest.mark.parametrize("chunked", [False, True])
def test_the_long_prompt_lands_among_decoding_chats(make_engine, tiny, chunked):
    run = run_scene(make_engine, tiny.arch.vocab_size, LONG, BUDGET, chunked, num_chats=CHATS, chat_prompt_tokens=20)
    steps = run.trace.steps
    first = steps.index(run.long_steps[0])
    before = steps[first - 8 : first]  # the 8 steps before it landed: every chat decoding, nothing else
    assert all(sum(s.decode_tokens.values()) == CHATS and not any(s.prefill_tokens.values()) for s in before)
    assert sum(s.prefill_tokens[LONG_ID] for s in run.long_steps) == LONG
    # Every step with (a chunk of) the long prompt also decodes every chat: they all wait for it.
    assert all(sum(s.decode_tokens.values()) == CHATS for s in run.long_steps)
    if chunked:
        chunk = BUDGET - CHATS
        assert [s.prefill_tokens[LONG_ID] for s in run.long_steps] == [chunk] * (LONG // chunk) + [LONG % chunk]
        assert all(s.num_scheduled_tokens <= BUDGET for s in steps)
    else:
        assert len(run.long_steps) == 1
    assert all(len(rec.token_times) == run.chat_tokens for r, rec in run.trace.requests.items() if r != LONG_ID)
    assert len(run.chat_itls) == CHATS * (run.chat_tokens - 1)
    assert run.decode_step > 0 and run.slowest_long_step == max(s.duration for s in run.long_steps)
    assert run.long_ttft >= sum(s.duration for s in run.long_steps) * (1 - 1e-9)
