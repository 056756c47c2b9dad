"""Pieces under the server (§11.9): incremental detokenization equals a full decode, the engine thread streams
deltas and applies commands between steps, and the bounded trace still gives /metrics."""

from __future__ import annotations

import asyncio
import random

import pytest

from minivllm.engine.detokenizer import IncrementalDetokenizer
from minivllm.sampling_params import SamplingParams
from minivllm.serving.async_engine import AsyncEngine


@pytest.fixture(scope="module")
def llm(tiny_qwen2):
    from minivllm import LLM

    return LLM(model=tiny_qwen2, max_model_len=256, num_gpu_blocks=64)


def test_incremental_text_equals_full_decode(llm):
    tok = llm.tokenizer
    rng = random.Random(0)
    multibyte = tok.encode("héllo wörld ✓ 日本語 the cat")  # byte-level BPE: characters split over tokens
    cases = [multibyte, [rng.randrange(320) for _ in range(200)], [5, 129, 129, 201, 315, 2, 40]]
    for ids in cases:
        for step in (1, 2, 3):
            detok = IncrementalDetokenizer(tok)
            parts = [detok.update(ids[i : i + step], finished=i + step >= len(ids)) for i in range(0, len(ids), step)]
            assert "".join(parts) == tok.decode(ids, skip_special_tokens=True) == detok.text
    held = IncrementalDetokenizer(tok)
    first = tok.encode("日")
    assert len(first) > 1 and held.update(first[:1]) == ""  # half a character waits for the rest
    assert held.update(first[1:]) == "日"


def test_engine_thread_streams_applies_commands_and_reports_errors(llm):
    engine = AsyncEngine(llm.engine)
    engine.start()
    params = SamplingParams(max_tokens=20, temperature=0.0)
    try:

        async def run():
            deltas = [d async for d in engine.generate("a", [5, 6, 7, 8], params)]
            budget = await engine.call(lambda e: e.set_scheduling(max_num_batched_tokens=200).max_num_batched_tokens)
            with pytest.raises(ValueError, match="empty"):  # the engine's own check comes back to the caller
                await anext(engine.generate("bad", [], params))
            return deltas, budget

        deltas, budget = asyncio.run(run())
    finally:
        engine.shutdown()
    assert budget == 200 and llm.engine.scheduler.scheduler_config.max_num_batched_tokens == 200
    assert [d.num_output_tokens for d in deltas] == list(range(1, 21)) and deltas[-1].finished
    assert "a" not in llm.engine.outputs and not llm.engine.has_unfinished_requests()
    expected = llm.generate([5, 6, 7, 8], params, use_tqdm=False)[0].outputs[0]
    assert sum((d.token_ids for d in deltas), []) == expected.token_ids
    assert "".join(d.text for d in deltas) == expected.text


def test_bounded_trace_keeps_metrics_consistent(llm):
    from minivllm.serving.metrics.prometheus import prometheus_text

    engine = AsyncEngine(llm.engine, max_trace_steps=10)
    trace = llm.engine.trace
    trace.max_steps = engine.max_trace_steps  # what start() sets
    try:
        llm.generate([[5 + i] * 8 for i in range(4)], SamplingParams(max_tokens=12, temperature=0.0), use_tqdm=False)
    finally:
        trace.max_steps = None
    assert trace.num_steps_recorded > 10 and len(trace.steps) <= 10  # the older half was dropped, maybe twice
    kept = len(trace.steps)
    assert [s.step for s in trace.steps] == list(range(trace.num_steps_recorded - kept, trace.num_steps_recorded))
    first = trace.steps[0].start
    assert all(r.finish_time is None or r.finish_time >= first for r in trace.requests.values())
    assert "vllm:num_requests_running{" in prometheus_text(trace)


def test_engine_thread_over_async_scheduling_streams_the_synchronous_tokens(llm, tiny_qwen2):
    """The server's engine thread drives an engine with async_scheduling (vLLM 0.10) as it drives the
    synchronous one: the same deltas, one per step, and nothing left in flight after the request ends."""
    from minivllm import LLM

    async_llm = LLM(model=tiny_qwen2, max_model_len=256, num_gpu_blocks=64, async_scheduling=True)
    engine = AsyncEngine(async_llm.engine)
    engine.start()
    params = SamplingParams(max_tokens=12, temperature=0.0)
    try:

        async def run():
            deltas = [d async for d in engine.generate("a", [5, 6, 7, 8], params)]
            # The step scheduled past the stop may still be in flight: the loop steps it out, with no output.
            while await engine.call(lambda e: e.has_unfinished_requests()):
                pass
            return deltas

        deltas = asyncio.run(run())
    finally:
        engine.shutdown()
    assert [d.num_output_tokens for d in deltas] == list(range(1, 13)) and deltas[-1].finished
    expected = llm.generate([5, 6, 7, 8], params, use_tqdm=False)[0].outputs[0]
    assert sum((d.token_ids for d in deltas), []) == expected.token_ids
