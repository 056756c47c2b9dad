"""Scheduler rules beyond the plain budget: bad input, abort, FSM, drafts, priority (§11.4, §11.8)."""

from __future__ import annotations

import pytest

from minivllm.lab.testbench import make_request, make_scheduler, run_table, step
from minivllm.request import Request, RequestStatus
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner
from tests.helpers.grammar import SlowGrammar


def state(s):
    return (
        [r.request_id for r in s.waiting],
        [r.request_id for r in s.running],
        sorted(s.requests),
        s.kv_cache_manager.block_pool.get_num_free_blocks(),
    )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (make_request("dup", 4), "request_id 'dup' is already in the scheduler"),
        (make_request("empty", 0), "the prompt is empty; it needs at least 1 token"),
        (
            make_request("long", 513),
            r"the prompt \(length 513\) is longer than max_model_len \(512\); allowed .*1\.\.512",
        ),
    ],
)
def test_bad_requests_are_rejected_and_leave_the_scheduler_as_it_was(request_, message):
    s = make_scheduler()
    s.add_request(make_request("dup", 8))
    runner = FakeModelRunner()
    step(s, runner)
    before = state(s)
    with pytest.raises(ValueError, match=message):
        s.add_request(request_)
    assert state(s) == before
    assert run_table(s, runner) and not s.has_unfinished_requests()


def test_max_tokens_below_one_is_rejected():
    s = make_scheduler()
    r = make_request("r", 4)
    r.max_tokens = 0
    with pytest.raises(ValueError, match="max_tokens must be at least 1, got 0"):
        s.add_request(r)
    assert state(s) == ([], [], [], 99)


def test_prompt_of_exactly_max_model_len_gets_one_token():
    s = make_scheduler(max_model_len=64)
    s.add_request(make_request("r", 64, max_tokens=10))
    _, out = step(s, FakeModelRunner())
    assert out.outputs[0].finish_reason == "length" and len(out.outputs[0].new_token_ids) == 1


@pytest.mark.parametrize("where", ["waiting", "running", "preempted", "mid_prefill"])
def test_abort_frees_every_block_wherever_the_request_is(where):
    s = make_scheduler(max_num_batched_tokens=128 if where != "mid_prefill" else 32, num_gpu_blocks=8)
    runner = FakeModelRunner()
    s.add_request(make_request("r0", 48, max_tokens=4))
    s.add_request(make_request("r1", 48, max_tokens=4))
    if where in ("running", "preempted", "mid_prefill"):
        step(s, runner)
    if where == "preempted":
        step(s, runner)
        assert s.requests["r1"].status == RequestStatus.PREEMPTED
    victim = "r0" if where == "mid_prefill" else "r1"
    s.finish_requests(victim, RequestStatus.FINISHED_ABORTED)
    assert victim not in s.requests
    out, _ = step(s, runner)
    assert victim in out.finished_req_ids  # the runner learns about it next step
    run_table(s, runner)
    assert s.kv_cache_manager.block_pool.get_num_free_blocks() == 7


def test_finish_requests_needs_a_finished_status():
    s = make_scheduler()
    with pytest.raises(ValueError, match="FINISHED_"):
        s.finish_requests("x", RequestStatus.RUNNING)
    s.finish_requests("unknown", RequestStatus.FINISHED_ABORTED)  # ignored, like vLLM


def test_waiting_for_fsm_is_passed_over_until_its_grammar_is_ready():
    s = make_scheduler(max_num_batched_tokens=64)
    s.add_request(Request("g", list(range(8)), SamplingParams(max_tokens=2), grammar=SlowGrammar(2)))
    s.add_request(make_request("a", 8, max_tokens=2))
    s.add_request(make_request("b", 8, max_tokens=2))
    runner = FakeModelRunner()
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"a": 8, "b": 8}
    assert [r.request_id for r in s.waiting] == ["g"] and s.waiting[0].status == RequestStatus.WAITING_FOR_FSM
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"a": 1, "b": 1}
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"g": 8}


def test_skipped_fsm_requests_keep_their_order_at_the_head():
    s = make_scheduler(max_num_batched_tokens=64)
    for name in ("g1", "g2"):
        s.add_request(Request(name, [1, 2], SamplingParams(max_tokens=1), grammar=SlowGrammar(5)))
    s.add_request(make_request("x", 4, max_tokens=1))
    step(s, FakeModelRunner())
    assert [r.request_id for r in s.waiting] == ["g1", "g2"]


def test_spec_tokens_share_the_budget_and_are_trimmed_to_the_chunk():
    s = make_scheduler(max_num_batched_tokens=64)
    s.add_request(make_request("a", 10, max_tokens=20))
    runner = FakeModelRunner()
    step(s, runner)
    a = s.requests["a"]
    a.spec_token_ids = [runner.true_token("a", 11), runner.true_token("a", 12) + 1, 5]
    s.add_request(make_request("b", 70, max_tokens=1))
    out, res = step(s, runner)
    # a: 1 real token + 3 drafts = 4; b gets the remaining 60.
    assert out.num_scheduled_tokens == {"a": 4, "b": 60}
    assert list(out.scheduled_spec_decode_tokens) == ["a"] and len(out.scheduled_spec_decode_tokens["a"]) == 3
    # The runner accepts the first draft, rejects the second: 2 tokens back, 2 rolled back.
    assert [o.new_token_ids for o in res.outputs if o.request_id == "a"][0] == [
        runner.true_token("a", 11),
        runner.true_token("a", 12),
    ]
    assert a.num_computed_tokens == 12 and a.num_tokens == 13


def test_spec_tokens_cut_by_the_budget():
    s = make_scheduler(max_num_batched_tokens=16, max_num_seqs=8)
    s.add_request(make_request("a", 10, max_tokens=20))
    runner = FakeModelRunner()
    step(s, runner)
    a = s.requests["a"]
    a.spec_token_ids = list(range(20))  # 1 + 20 > budget 16: only 15 drafts fit
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"a": 16} and len(out.scheduled_spec_decode_tokens["a"]) == 15


def test_priority_policy_orders_waiting_and_preempts_the_lowest_priority():
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8, policy="priority")
    s.add_request(make_request("low", 48, max_tokens=4, priority=5, arrival_time=0.0))
    s.add_request(make_request("high", 48, max_tokens=4, priority=0, arrival_time=1.0))
    assert [r.request_id for r in s.waiting] == ["high", "low"]
    runner = FakeModelRunner()
    out, _ = step(s, runner)
    assert list(out.num_scheduled_tokens) == ["high", "low"]
    out, _ = step(s, runner)  # both need a 4th block, one is free: high gets it
    assert out.num_scheduled_tokens == {"high": 1} and out.preempted_req_ids == {"low"}


def test_priority_victim_scheduled_earlier_in_the_step_is_undone():
    # "late" (priority 9) runs first in the list and takes the last free block; then "vip"
    # (priority 0) needs a block: late is preempted and its turn this step is taken back.
    s = make_scheduler(max_num_batched_tokens=128, num_gpu_blocks=8, policy="priority")
    s.add_request(make_request("late", 48, max_tokens=6, priority=9))
    runner = FakeModelRunner()
    step(s, runner)
    s.add_request(make_request("vip", 48, max_tokens=6, priority=0))
    step(s, runner)
    assert [r.request_id for r in s.running] == ["late", "vip"]
    out, _ = step(s, runner)
    assert out.preempted_req_ids == {"late"}
    assert "late" not in out.num_scheduled_tokens and out.total_num_scheduled_tokens == 1
    assert s.requests["late"].num_computed_tokens == 0


def test_reconfigure_applies_from_the_next_step():
    from minivllm.config import SchedulerConfig

    s = make_scheduler(max_num_batched_tokens=32, max_model_len=256)
    s.add_request(make_request("long", 200, max_tokens=1))
    runner = FakeModelRunner()
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"long": 32}
    s.reconfigure(SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16, max_model_len=256))
    out, _ = step(s, runner)
    assert out.num_scheduled_tokens == {"long": 168}
    with pytest.raises(ValueError, match="max_model_len and policy cannot change"):
        s.reconfigure(SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=16, max_model_len=512))


def test_preempt_request_by_name_and_recover_from_the_cache():
    s = make_scheduler(max_num_batched_tokens=128, enable_prefix_caching=True)
    s.add_request(make_request("a", 40, max_tokens=6))
    s.add_request(make_request("b", list(range(500, 540)), max_tokens=6))
    runner = FakeModelRunner()
    step(s, runner)
    s.preempt_request("a")
    assert s.requests["a"].status == RequestStatus.PREEMPTED and s.waiting[0].request_id == "a"
    out, _ = step(s, runner)
    (resumed,) = [c for c in out.scheduled_cached_reqs if c.resumed_from_preemption]
    assert resumed.req_id == "a" and resumed.num_computed_tokens == 32  # 2 full blocks back from the cache
    assert out.num_scheduled_tokens["a"] == 41 - 32
    with pytest.raises(ValueError, match="request 'zzz' is not running; running requests"):
        s.preempt_request("zzz")
