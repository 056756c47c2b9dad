"""Async scheduling end to end (vLLM 0.10's ``async_scheduling``; ``minivllm.core.async_scheduler``,
``minivllm.engine.batch_queue``): the same greedy tokens as the synchronous engine on the real SmolLM2 in fp32
(mixed prompt lengths, chunked prefill, a KV pool small enough to preempt, EOS and stop strings found one
step late), no KV block left behind, true stats, the overlap itself (shown by events), the refusals, and a
failed step undone with the step queued behind it.
"""

from __future__ import annotations

import threading

import pytest

from minivllm import LLM, SamplingParams
from minivllm.config import EngineConfig
from minivllm.core.async_scheduler import AsyncScheduler
from minivllm.core.rollback import RequestError
from minivllm.engine.arg_utils import add_engine_args, engine_kwargs
from minivllm.engine.llm_engine import LLMEngine
from minivllm.worker.fake_runner import FakeModelRunner
from minivllm.worker.model_runner import ModelRunner
from tests.helpers.faulty_runner import inject

PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea.",
    "List three prime numbers and explain, in two sentences, why each of them is prime.",
    "Hi",
    "Once upon a time, in a small village at the foot of a mountain, there lived an old clockmaker who",
    "def fibonacci(n):",
]


def smollm2_engine(smollm2, **kwargs) -> LLMEngine:
    base = dict(model="smollm2", device="cpu", dtype="float32", max_model_len=512, max_num_seqs=4)
    config = EngineConfig.from_kwargs(**{**base, **kwargs})
    return LLMEngine(config, model_runner=ModelRunner(config, smollm2))


def run_to_end(engine: LLMEngine, params: list[SamplingParams]) -> dict[str, tuple[list[int], str | None, str]]:
    """Add every prompt, step to the end checking the stats after each step; returns (tokens, reason, text)."""
    s = engine.scheduler
    update = s.update_from_output

    def checked_update(scheduler_output, runner_output):
        core = update(scheduler_output, runner_output)
        stats = core.scheduler_stats  # the gauges: what the scheduler holds right after the update
        assert stats is not None and (stats.num_running_reqs, stats.num_waiting_reqs) == (
            len(s.running),
            len(s.waiting),
        )
        assert stats.gpu_cache_usage == s.kv_cache_manager.usage
        return core

    s.update_from_output = checked_update  # type: ignore[method-assign]
    for i, (prompt, p) in enumerate(zip(PROMPTS, params)):
        engine.add_request(str(i), prompt, p)
    while engine.has_unfinished_requests():
        engine.step()
    pool = engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1  # no block leaked (the null block is never free)
    assert not engine.scheduler.kv_cache_manager.req_to_blocks and not engine.scheduler.requests
    return {
        r: (list(c.token_ids), c.finish_reason, c.text)
        for r, c in ((r, o.outputs[0]) for r, o in engine.outputs.items())
    }


@pytest.mark.parametrize(
    "scene",
    [
        dict(max_num_batched_tokens=16, num_gpu_blocks=200),  # chunked prefill: every prompt over 2+ steps
        dict(max_num_batched_tokens=32, num_gpu_blocks=6, block_size=16, max_model_len=80),  # 5 usable: preempts
    ],
    ids=["chunked", "preempting"],
)
def test_same_greedy_tokens_as_synchronous(smollm2, scene):
    params = [
        SamplingParams(max_tokens=n, temperature=0.0, stop=stop)
        for n, stop in zip([12, 20, 9, 30, 16, 14], [None, None, ["prime"], None, None, ["\n"]])
    ]
    sync = smollm2_engine(smollm2, **scene)
    expected = run_to_end(sync, params)
    engine = smollm2_engine(smollm2, async_scheduling=True, **scene)
    assert isinstance(engine.scheduler, AsyncScheduler)
    got = run_to_end(engine, params)
    assert got == expected
    assert {r for r, (_, reason, _) in got.items() if reason == "stop"}  # stops found one step late still cut
    if "block_size" in scene:
        assert any(s.preempted for s in engine.trace.steps)  # the scene did preempt


def test_step_n_plus_1_is_scheduled_while_step_n_runs():
    """Each step waits, inside the runner, until the engine has scheduled the next one: with the overlap it
    always happens; the synchronous loop would only schedule after the step returned."""
    engine = LLMEngine(
        EngineConfig.from_kwargs(
            model="fake",
            async_scheduling=True,
            num_gpu_blocks=64,
            max_num_batched_tokens=64,
            max_num_seqs=8,
            max_model_len=256,
        ),
        model_runner=FakeModelRunner(vocab_size=500),
    )
    scheduled = [threading.Event() for _ in range(100)]
    schedule, calls, seen = engine.scheduler.schedule, [0], []

    def counting_schedule():
        out = schedule()
        scheduled[calls[0]].set()
        calls[0] += 1
        return out

    def wait_for_next(out):
        k = len(seen)
        seen.append(scheduled[k + 1].wait(timeout=60))  # the (k+1)-th schedule() while step k runs

    engine.scheduler.schedule = counting_schedule  # type: ignore[method-assign]
    inject(engine, wait_for_next)
    for i in range(3):
        engine.add_request(str(i), [1, 2, 3, 4 + i], SamplingParams(max_tokens=5, ignore_eos=True))
    while engine.has_unfinished_requests() and len(seen) < 5:
        engine.step()
    assert seen == [True] * 5


def test_refusals_name_the_parameter(smollm2):
    with pytest.raises(ValueError, match=r"async_scheduling=True does not support speculative decoding"):
        EngineConfig.from_kwargs(async_scheduling=True, num_speculative_tokens=2)
    with pytest.raises(ValueError, match=r"async_scheduling must be True or False"):
        EngineConfig.from_kwargs(async_scheduling="yes")
    engine = smollm2_engine(smollm2, async_scheduling=True, num_gpu_blocks=64)
    with pytest.raises(ValueError, match=r"guided_choice \(structured output\) is not supported with async_sched"):
        engine.add_request("g", "Yes or no?", SamplingParams(guided_choice=["yes", "no"]))
    assert not engine.has_unfinished_requests()
    with pytest.raises(ValueError, match="async_scheduling cannot change"):
        engine.set_scheduling(async_scheduling=False)


def test_the_flag_and_llm_take_vllms_name():
    import argparse

    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    assert engine_kwargs(parser.parse_args(["--async-scheduling"]))["async_scheduling"] is True
    assert "async_scheduling" not in engine_kwargs(parser.parse_args([]))  # off unless asked: the config's False
    llm = LLM(
        "fake",
        async_scheduling=True,
        num_gpu_blocks=64,
        max_num_seqs=8,
        max_model_len=256,
        model_runner=FakeModelRunner(vocab_size=500),
    )
    out = llm.generate([[5, 6, 7], [8, 9]], SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in out] == [4, 4]
    assert isinstance(llm.engine.scheduler, AsyncScheduler) and not llm.engine.scheduler.has_unfinished_requests()
    # What may remain in flight is the step holding the discarded tokens past the stops: it drains with no output.
    while llm.engine.has_unfinished_requests():
        assert llm.engine.step() == []


def test_a_failed_step_is_undone_with_the_step_queued_behind_it():
    """The 4th step fails, blamed on its last request; the 5th, already scheduled, never runs. The victim ends
    alone with the reason; every other request gets the clean run's tokens; no block leaks."""

    def run(fault_at: int | None):
        engine = LLMEngine(
            EngineConfig.from_kwargs(
                model="fake",
                async_scheduling=True,
                num_gpu_blocks=10,
                max_num_batched_tokens=24,
                max_model_len=128,
                max_num_seqs=4,
            ),
            model_runner=FakeModelRunner(vocab_size=320),
        )
        executed, victims = [0], []

        def fault(out):
            executed[0] += 1
            if executed[0] == fault_at:
                victims.append(list(out.num_scheduled_tokens)[-1])
                raise RequestError(victims[-1], "injected fault")

        inject(engine, fault)
        for i in range(4):
            engine.add_request(f"r{i}", list(range(3, 40)) + [50 + i] * (5 + 7 * i), SamplingParams(max_tokens=8))
        while engine.has_unfinished_requests():
            engine.step()
        pool = engine.scheduler.kv_cache_manager.block_pool
        assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1
        results = {r: (o.outputs[0].token_ids, o.outputs[0].finish_reason) for r, o in engine.outputs.items()}
        return results, victims, engine

    clean, _, _ = run(None)
    failed, victims, engine = run(4)
    assert len(victims) == 1 and failed[victims[0]][1] == "abort"
    assert engine.outputs[victims[0]].outputs[0].stop_reason == "injected fault"
    assert {r: v for r, v in failed.items() if r not in victims} == {r: v for r, v in clean.items() if r not in victims}


def test_an_interrupt_raised_by_the_runner_leaves_no_request_behind():
    """As the synchronous engine's test in test_rollback.py: Ctrl-C inside a step of LLM.generate."""
    llm = LLM(
        "fake",
        async_scheduling=True,
        num_gpu_blocks=40,
        max_num_seqs=8,
        max_model_len=256,
        model_runner=FakeModelRunner(vocab_size=500),
    )
    calls = []

    def interrupt(out) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    inject(llm.engine, interrupt)
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[5, 6, 7], [8, 9]], params, use_tqdm=False)
    assert not llm.engine.has_unfinished_requests() and not llm.engine.outputs
    pool = llm.engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1
    assert [len(o.outputs[0].token_ids) for o in llm.generate([[5, 6, 7]], params, use_tqdm=False)] == [6]
