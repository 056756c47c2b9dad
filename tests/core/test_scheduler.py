"""Scheduler step tables worked out by hand from the vLLM V1 rules (§11.3, §11.5)."""

from __future__ import annotations

from minivllm.lab.testbench import make_request, make_scheduler, run_table, step
from minivllm.request import RequestStatus
from minivllm.worker.fake_runner import FakeModelRunner


def test_three_80_token_prompts_under_budget_64():
    # step 0: r0 takes the whole budget; step 1: r0 finishes its prompt (16) and r1
    # starts (48); step 2: r0 decodes (1), r1 finishes (32), r2 gets what is left (31) ...
    s = make_scheduler(max_num_batched_tokens=64)
    for i in range(3):
        s.add_request(make_request(f"r{i}", 80, max_tokens=2))
    assert run_table(s) == [
        {"r0": 64},
        {"r0": 16, "r1": 48},
        {"r0": 1, "r1": 32, "r2": 31},
        {"r1": 1, "r2": 49},
        {"r2": 1},
    ]


def test_chunked_prefill_off_prompts_wait_whole():
    # Chunking off: a prompt that does not fit the remaining budget waits (and is skipped).
    s = make_scheduler(max_num_batched_tokens=128, max_model_len=128, enable_chunked_prefill=False)
    for i in range(3):
        s.add_request(make_request(f"r{i}", 80, max_tokens=2))
    assert run_table(s) == [{"r0": 80}, {"r0": 1, "r1": 80}, {"r1": 1, "r2": 80}, {"r2": 1}]


def test_chunking_off_lets_a_short_prompt_pass_a_long_one():
    s = make_scheduler(max_num_batched_tokens=128, max_model_len=128, enable_chunked_prefill=False)
    s.add_request(make_request("long0", 100, max_tokens=1))
    s.add_request(make_request("long1", 100, max_tokens=1))
    s.add_request(make_request("short", 20, max_tokens=1))
    assert run_table(s)[0] == {"long0": 100, "short": 20}
    assert s.get_num_unfinished_requests() == 0


def test_max_num_seqs_2_with_threshold_30():
    s = make_scheduler(max_num_batched_tokens=64, max_num_seqs=2, long_prefill_token_threshold=30)
    for i in range(3):
        s.add_request(make_request(f"r{i}", 80, max_tokens=2))
    assert run_table(s) == [
        {"r0": 30, "r1": 30},
        {"r0": 30, "r1": 30},
        {"r0": 20, "r1": 20},
        {"r0": 1, "r1": 1},
        {"r2": 30},
        {"r2": 30},
        {"r2": 20},
        {"r2": 1},
    ]


def test_pool_too_small_for_two_preempts_the_last_running():
    # 8 blocks of 16 = null + 7 usable. Each 48-token prompt takes 3 blocks; the first
    # decode of each needs a 4th. r0 gets the last free block, r1 must preempt itself.
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8)
    for i in range(2):
        s.add_request(make_request(f"r{i}", 48, max_tokens=4))
    runner = FakeModelRunner()
    out0, _ = step(s, runner)
    out1, _ = step(s, runner)
    r1 = s.requests["r1"]
    assert out1.num_scheduled_tokens == {"r0": 1}
    assert out1.preempted_req_ids == {"r1"}
    assert r1.status == RequestStatus.PREEMPTED and r1.num_computed_tokens == 0
    assert r1.num_output_tokens == 1  # its output so far is kept
    assert s.waiting[0] is r1
    # r1 needs 49 tokens = 4 blocks again; only 3 are free until r0 finishes.
    assert [dict(o.num_scheduled_tokens) for o in [out0, out1]] + run_table(s, runner) == [
        {"r0": 48, "r1": 48},
        {"r0": 1},
        {"r0": 1},
        {"r0": 1},
        {"r1": 49},
        {"r1": 1},
        {"r1": 1},
    ]


def test_preempted_request_recovers_full_blocks_from_the_prefix_cache():
    # Same scene with prefix caching: r1's three full prompt blocks are still cached when
    # it comes back, so it recomputes one token instead of 49 (path A of §11.5).
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8, enable_prefix_caching=True)
    s.add_request(make_request("r0", list(range(48)), max_tokens=4))
    s.add_request(make_request("r1", list(range(1000, 1048)), max_tokens=4))
    table = run_table(s)
    assert table == [{"r0": 48, "r1": 48}, {"r0": 1}, {"r0": 1}, {"r0": 1}, {"r1": 1}, {"r1": 1}, {"r1": 1}]


def test_several_victims_go_back_in_order():
    # A (mid-prefill) needs 4 new blocks and none is free: D is popped (2 blocks), then
    # C (2 blocks). Each victim is prepended, so waiting becomes [C, D] (vLLM's appendleft).
    s = make_scheduler(max_num_batched_tokens=160, long_prefill_token_threshold=64, num_gpu_blocks=11)
    for name, prompt in [("A", 128), ("B", 17), ("C", 32), ("D", 32)]:
        s.add_request(make_request(name, prompt, max_tokens=8))
    runner = FakeModelRunner()
    out0, _ = step(s, runner)
    assert out0.num_scheduled_tokens == {"A": 64, "B": 17, "C": 32, "D": 32}
    assert s.kv_cache_manager.block_pool.get_num_free_blocks() == 0
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"A": 64, "B": 1}
    assert out.preempted_req_ids == {"C", "D"}
    assert [r.request_id for r in s.waiting] == ["C", "D"]


def test_no_admission_in_a_step_that_preempted():
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8)
    s.add_request(make_request("r0", 48, max_tokens=4))
    s.add_request(make_request("r1", 48, max_tokens=4))
    runner = FakeModelRunner()
    step(s, runner)
    s.add_request(make_request("tiny", 1, max_tokens=1))  # would fit, but must wait
    out, _ = step(s, runner)
    assert out.preempted_req_ids == {"r1"} and "tiny" not in out.num_scheduled_tokens


def test_scheduler_output_lists_new_then_resumed_then_running():
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8)
    s.add_request(make_request("r0", 48, max_tokens=4))
    s.add_request(make_request("r1", 48, max_tokens=4))
    runner = FakeModelRunner()
    out0, _ = step(s, runner)
    assert [r.req_id for r in out0.scheduled_new_reqs] == ["r0", "r1"]
    assert out0.scheduled_new_reqs[0].block_ids == [1, 2, 3]
    out1, _ = step(s, runner)
    (cached,) = out1.scheduled_cached_reqs
    assert (cached.req_id, cached.resumed_from_preemption, cached.new_block_ids) == ("r0", False, [7])
    assert cached.num_computed_tokens == 48 and len(cached.new_token_ids) == 1
    for _ in range(3):
        out, _ = step(s, runner)
    (resumed,) = out.scheduled_cached_reqs
    assert resumed.req_id == "r1" and resumed.resumed_from_preemption
    assert len(resumed.new_block_ids) == 4 and len(resumed.new_token_ids) == 49
    assert out.finished_req_ids == {"r0"}


def test_running_request_skips_when_budget_is_spent_and_keeps_its_place():
    s = make_scheduler(max_num_batched_tokens=16, max_num_seqs=16)
    s.add_request(make_request("a", 16, max_tokens=3))
    s.add_request(make_request("b", 40, max_tokens=1))
    table = run_table(s)
    assert table[:4] == [{"a": 16}, {"a": 1, "b": 15}, {"a": 1, "b": 15}, {"b": 10}]
