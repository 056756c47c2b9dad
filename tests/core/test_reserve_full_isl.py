"""``scheduler_reserve_full_isl``: admit a waiting request only if its whole sequence fits (§11.8.3).

Later vLLM's admission gate (PR #37307, ``allocate_slots(..., full_sequence_must_fit=True)``); off by default
here, where the scheduler keeps vLLM 0.8.5's rule (the first chunk's blocks are enough to be admitted).
"""

from __future__ import annotations

import pytest

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.kv_cache_manager import KVCacheManager
from minivllm.core.scheduler import Scheduler
from minivllm.lab.testbench import make_request, run_steps, step
from minivllm.request import Request
from minivllm.worker.fake_runner import FakeModelRunner


def scheduler(reserve: bool, num_gpu_blocks: int, budget: int = 64, caching: bool = False, **kw) -> Scheduler:
    kw.setdefault("max_model_len", (num_gpu_blocks - 1) * 16)
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=8, scheduler_reserve_full_isl=reserve, **kw),
        CacheConfig(block_size=16, num_gpu_blocks=num_gpu_blocks, enable_prefix_caching=caching),
    )


def thrash_run(reserve: bool) -> dict:
    """Four 100-token prompts (7 blocks each, 8 with their 16 outputs) arrive together; 20 usable blocks."""
    s = scheduler(reserve, num_gpu_blocks=21)
    arrivals = [(0, make_request(f"r{i}", list(range(1000 * i, 1000 * i + 100)), max_tokens=16)) for i in range(4)]
    runner = FakeModelRunner()
    scheduled = preemptions = max_running = 0
    for out, _ in run_steps(s, runner, arrivals=arrivals, max_steps=500):
        scheduled += out.total_num_scheduled_tokens
        preemptions += len(out.preempted_req_ids)
        max_running = max(max_running, len(s.running))
    assert not s.has_unfinished_requests()
    return {
        "preemptions": preemptions,
        "recomputed": scheduled - 4 * 100 - 4 * 15,  # each request needs its prompt and 15 fed-back tokens
        "max_running": max_running,
        "tokens": {r: list(t) for r, t in runner.tokens.items()},
    }


def test_off_is_vllm_085_admit_on_the_first_chunk_then_preempt():
    off = thrash_run(reserve=False)
    assert off["preemptions"] == 7 and off["recomputed"] == 426 and off["max_running"] == 3


def test_on_admits_fewer_at_once_and_never_preempts_here():
    off, on = thrash_run(reserve=False), thrash_run(reserve=True)
    assert on["preemptions"] == 0 and on["recomputed"] == 0 and on["max_running"] == 2
    assert on["max_running"] < off["max_running"] and on["preemptions"] < off["preemptions"]
    assert on["tokens"] == off["tokens"]  # the same tokens come out, only the schedule differs


def third_arrives(reserve: bool, third: Request, caching: bool = False, first=None) -> tuple[Scheduler, dict]:
    """a and b (40-token prompts, 3 blocks each) decode in a 10-block pool, 4 blocks free; budget 34, so after
    their two decodes the third request's chunk is at most 32 tokens (2 blocks). What does the waiting loop do?"""
    s = scheduler(reserve, num_gpu_blocks=11, budget=34, caching=caching)
    runner = FakeModelRunner()
    s.add_request(first or make_request("a", list(range(100, 140)), max_tokens=50))
    s.add_request(make_request("b", list(range(200, 240)), max_tokens=50))
    for _ in range(3):  # a: 34 + 6, b: 28 + 12 prompt tokens, then both decode
        step(s, runner)
    assert all(r.num_output_tokens > 0 for r in s.running)
    assert s.kv_cache_manager.block_pool.get_num_free_blocks() == 4
    s.add_request(third)
    out, _ = step(s, runner)
    assert not out.preempted_req_ids  # the gate never preempts a running request
    return s, out.num_scheduled_tokens


@pytest.mark.parametrize(("prompt", "off", "on"), [(64, 32, 32), (65, 32, 0), (150, 32, 0)])
def test_the_whole_prompt_must_fit_the_free_blocks_not_just_the_chunk(prompt, off, on):
    for reserve, expected in ((False, off), (True, on)):
        third = make_request("c", list(range(300, 300 + prompt)), max_tokens=4)
        s, scheduled = third_arrives(reserve, third)
        assert scheduled.get("c", 0) == expected, (reserve, prompt)


def test_reserving_schedules_and_allocates_only_the_chunk():
    s = scheduler(True, num_gpu_blocks=21, budget=32)
    s.add_request(make_request("c", 200, max_tokens=4))  # 13 blocks for the whole prompt, 20 free
    out, _ = step(s, FakeModelRunner())
    assert out.num_scheduled_tokens["c"] == 32  # the chunk, not the prompt
    assert len(s.kv_cache_manager.get_block_ids("c")) == 2  # and blocks for the chunk only
    assert s.kv_cache_manager.block_pool.get_num_free_blocks() == 18


def test_a_blocked_head_stops_admission_for_the_step_as_a_failed_allocation_does():
    s = scheduler(True, num_gpu_blocks=11, budget=256)
    runner = FakeModelRunner()
    s.add_request(make_request("a", 96, max_tokens=50))  # 6 blocks, a 7th for its first decode
    step(s, runner)
    s.add_request(make_request("big", list(range(500, 580)), max_tokens=4))  # 5 blocks: 3 are free
    s.add_request(make_request("small", list(range(600, 610)), max_tokens=4))  # 1 block would fit
    out, _ = step(s, runner)
    assert set(out.num_scheduled_tokens) == {"a"}  # FCFS: nobody overtakes the head
    assert [r.request_id for r in s.waiting] == ["big", "small"]


def test_prefix_cache_hits_count_as_already_present():
    shared = list(range(100, 140)) + list(range(140, 148))  # 48 tokens: 3 full blocks
    a = make_request("a", shared[:40], max_tokens=50)  # a's prompt: the first 40 shared tokens
    # c = a's 2 full prompt blocks (32 tokens, cached while a runs) + 40 more tokens: 5 blocks, 2 of them
    # hits held by a, so 3 new ones are needed and 4 are free: it fits. Chunk: 32 of the 40 uncached tokens.
    c = make_request("c", shared[:32] + list(range(700, 740)), max_tokens=4)
    s, scheduled = third_arrives(True, c, caching=True, first=a)
    assert c.num_cached_tokens == 32 and scheduled["c"] == 32
    # The same prompt with nothing cached needs all 5 blocks: more than the 4 free, so it waits.
    cold = make_request("c", list(range(800, 832)) + list(range(700, 740)), max_tokens=4)
    s, scheduled = third_arrives(True, cold, caching=True, first=make_request("a", 40, max_tokens=50))
    assert "c" not in scheduled


def test_a_preempted_request_needs_room_for_its_outputs_too():
    kv = KVCacheManager(num_gpu_blocks=5, block_size=16, max_model_len=160, enable_caching=False)  # 4 usable
    r = make_request("r", 40, max_tokens=100)  # the prompt alone: 3 blocks
    for t in range(35):  # sampled before a preemption: now 75 tokens, 5 blocks
        r.append_output_token_ids(t)
    assert kv.allocate_slots(r, 16, full_sequence_must_fit=True) is None
    assert len(kv.allocate_slots(r, 16) or []) == 1  # 0.8.5's check: the chunk's one block fits


def test_on_refuses_a_pool_that_cannot_hold_max_model_len_off_allows_it():
    with pytest.raises(ValueError, match=r"scheduler_reserve_full_isl=True needs max_model_len \(200\) <= .*160"):
        scheduler(True, num_gpu_blocks=11, max_model_len=200)
    s = scheduler(False, num_gpu_blocks=11, max_model_len=200)  # 0.8.5: the bare scheduler takes it
    with pytest.raises(ValueError, match="could never fit whole"):
        s.reconfigure(
            SchedulerConfig(
                max_num_batched_tokens=64, max_num_seqs=8, max_model_len=200, scheduler_reserve_full_isl=True
            )
        )
    assert s.scheduler_config.scheduler_reserve_full_isl is False  # the refused config was not taken


def test_a_max_length_request_is_admitted_when_the_pool_is_empty():
    s = scheduler(True, num_gpu_blocks=11, budget=64)  # max_model_len 160 = the whole pool
    s.add_request(make_request("a", 40, max_tokens=100))
    s.add_request(make_request("max", 159, max_tokens=1))
    steps = list(run_steps(s, max_steps=500))
    assert not s.has_unfinished_requests()
    admitted = next(i for i, (out, _) in enumerate(steps) if "max" in out.num_scheduled_tokens)
    assert admitted > 0 and all(not out.preempted_req_ids for out, _ in steps)  # it waited for a to finish


def test_the_flag_must_be_a_bool():
    with pytest.raises(ValueError, match="scheduler_reserve_full_isl must be True or False, got 1"):
        SchedulerConfig(scheduler_reserve_full_isl=1)
