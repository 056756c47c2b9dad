"""AsyncScheduler (vLLM 0.10's ``async_scheduling``): two steps in flight, outputs applied one step late.

Shaped as vLLM 0.10.1's ``tests/v1/core/test_async_scheduler.py`` (same test names, same loop: a deque of
scheduled steps, the oldest updated, then one more scheduled), plus 0.10.1's ``test_preempt_during_execution``
and checks of our own (placeholders, no block leak, the "off" switch). Cases are our own; the runner is the
FakeModelRunner, which keeps its own mirror of each request's tokens as the real runner does.
"""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minivllm.core.async_scheduler import AsyncScheduler
from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.core.scheduler import Scheduler
from minivllm.lab.testbench import make_request, make_scheduler
from minivllm.request import Request, RequestStatus
from minivllm.worker.fake_runner import FakeModelRunner


def create_scheduler(
    async_scheduling: bool = True,
    max_num_batched_tokens: int = 8192,
    num_blocks: int = 1000,
    block_size: int = 16,
    enable_prefix_caching: bool = False,
    max_model_len: int = 1024,
) -> Scheduler:
    return make_scheduler(
        async_scheduling=async_scheduling,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=min(64, max_num_batched_tokens),
        max_model_len=max_model_len,
        block_size=block_size,
        num_gpu_blocks=num_blocks,
        enable_prefix_caching=enable_prefix_caching,
    )


def create_requests(num_requests: int, num_tokens: int = 10, max_tokens: int = 16, same_prompt: bool = False):
    """Prompts of ``num_tokens`` distinct tokens per request (or one shared prompt)."""
    return [
        make_request(str(i), [(0 if same_prompt else 1000 * i) + t for t in range(num_tokens)], max_tokens)
        for i in range(num_requests)
    ]


def run_queue(scheduler: Scheduler, runner: FakeModelRunner, sched_outputs: deque[SchedulerOutput], each=None):
    """vLLM's test loop: update the oldest step, then schedule one more (two in flight)."""
    while sched_outputs:
        if each is not None:
            each()
        sched_output = sched_outputs.popleft()
        scheduler.update_from_output(sched_output, runner.execute_model(sched_output))
        sched_output = scheduler.schedule()
        if sched_output.num_scheduled_tokens:
            sched_outputs.append(sched_output)


def assert_clean(scheduler: Scheduler) -> None:
    """Nothing unfinished and every block back in the pool (the null block is never free)."""
    assert scheduler.get_num_unfinished_requests() == 0
    pool = scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1
    assert not scheduler.kv_cache_manager.req_to_blocks


def test_the_engine_default_is_synchronous():
    scheduler = create_scheduler(async_scheduling=False)
    assert type(scheduler) is Scheduler
    scheduler.add_request(req := make_request("a", 10, 3))
    scheduler.schedule()
    assert req.num_output_placeholders == 0  # the synchronous scheduler never counts placeholders
    assert isinstance(create_scheduler(), AsyncScheduler)


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 5])
def test_stop_by_max_tokens(max_tokens: int):
    scheduler = create_scheduler()
    runner = FakeModelRunner()
    req0, req1 = create_requests(num_requests=2, max_tokens=max_tokens)

    sched_outputs: deque[SchedulerOutput] = deque()
    scheduler.add_request(req0)
    sched_outputs.append(scheduler.schedule())
    assert req0.num_output_placeholders == 1  # its prefill ends this step: one token to come
    scheduler.add_request(req1)
    sched_outputs.append(scheduler.schedule())
    # req0's decode was scheduled before its first token was known.
    assert sched_outputs[1].num_scheduled_tokens == {"0": 1, "1": 10}
    assert req0.num_output_placeholders == 2

    run_queue(scheduler, runner, sched_outputs)
    assert req0.num_output_tokens == max_tokens  # the token scheduled past the stop was discarded
    assert req1.num_output_tokens == max_tokens
    assert req0.status == req1.status == RequestStatus.FINISHED_LENGTH_CAPPED
    assert_clean(scheduler)


def test_abort():
    scheduler = create_scheduler()
    runner = FakeModelRunner()
    requests = create_requests(num_requests=10, max_tokens=20)
    for req in requests:
        scheduler.add_request(req)
    sched_outputs: deque[SchedulerOutput] = deque([scheduler.schedule(), scheduler.schedule()])

    abort_order = [0, 8, 3, 1, 6, 4, 2, 5, 7, 9]
    pending = abort_order.copy()

    def abort_request():
        if pending:
            scheduler.finish_requests(requests[pending.pop(0)].request_id, RequestStatus.FINISHED_ABORTED)

    run_queue(scheduler, runner, sched_outputs, each=abort_request)
    for i, req in enumerate(requests):
        assert req.status == RequestStatus.FINISHED_ABORTED
        assert req.num_output_tokens == abort_order.index(i)  # one token per update applied before its abort
    assert_clean(scheduler)


def test_preempt():
    """A pool too small for all: preemptions happen while steps are in flight; every request still ends with
    exactly max_tokens tokens, the model's own, and no block is left behind."""
    scheduler = create_scheduler(num_blocks=11, block_size=16)  # 10 usable blocks = 160 tokens
    runner = FakeModelRunner()
    requests = create_requests(num_requests=4, num_tokens=30, max_tokens=40)
    for req in requests:
        scheduler.add_request(req)
    sched_outputs: deque[SchedulerOutput] = deque([scheduler.schedule(), scheduler.schedule()])
    preempted: set[str] = set()

    def watch():
        preempted.update(r.request_id for r in requests if r.status == RequestStatus.PREEMPTED)

    run_queue(scheduler, runner, sched_outputs, each=watch)
    assert preempted  # the scene did preempt
    for req in requests:
        assert req.num_output_tokens == 40  # (a finished request may keep the placeholder of its discarded step)
        expected = [runner.true_token(req.request_id, 30 + i) for i in range(40)]
        assert list(req.output_token_ids) == expected
    assert_clean(scheduler)


def test_preempt_during_execution():
    """vLLM 0.10's rule: a request preempted while its step runs still gets that step's token."""
    scheduler = create_scheduler(max_num_batched_tokens=100, num_blocks=11, block_size=16)
    requests = create_requests(num_requests=2, num_tokens=79)
    scheduler.add_request(requests[0])
    out0 = scheduler.schedule()
    assert len(out0.scheduled_new_reqs[0].block_ids) == 5
    scheduler.add_request(requests[1])
    out1 = scheduler.schedule()  # request 0's decode at position 79 (a placeholder) and request 1's prefill
    assert out1.num_scheduled_tokens == {"0": 1, "1": 79}
    scheduler.update_from_output(out0, ModelRunnerOutput(["0"], {"0": 0}, [[0]]))
    scheduler.schedule()  # request 0's position 80 needs a 6th block: request 1, still in out1, is preempted
    assert scheduler.running == [requests[0]]
    assert requests[1].status == RequestStatus.PREEMPTED
    scheduler.update_from_output(out1, ModelRunnerOutput(["0", "1"], {"0": 0, "1": 1}, [[7], [42]]))
    assert list(requests[1].output_token_ids) == [42]
    assert requests[1].num_output_placeholders == 0


def test_prefix_caching_for_prefill_dedup():
    CHUNK_SIZE, BLOCK_SIZE, num_prompt_tokens = 1000, 16, 100
    scheduler = create_scheduler(max_num_batched_tokens=CHUNK_SIZE, enable_prefix_caching=True, block_size=BLOCK_SIZE)
    runner = FakeModelRunner()
    requests = create_requests(num_requests=5, num_tokens=num_prompt_tokens, max_tokens=3, same_prompt=True)
    requests_copy = requests.copy()
    scheduler.add_request(requests.pop(0))
    scheduler.add_request(requests.pop(0))
    sched_outputs: deque[SchedulerOutput] = deque([scheduler.schedule()])
    # Both prompts in one step: all blocks but the last are shared.
    assert len(sched_outputs[0].num_scheduled_tokens) == 2
    num_blocks = num_prompt_tokens // BLOCK_SIZE
    assert requests_copy[0].num_cached_tokens == 0
    assert requests_copy[1].num_cached_tokens >= num_blocks * BLOCK_SIZE
    sched_outputs.append(scheduler.schedule())

    def add_one():
        if requests:
            scheduler.add_request(requests.pop(0))

    run_queue(scheduler, runner, sched_outputs, each=add_one)
    assert scheduler.get_num_unfinished_requests() == 0
    for req in requests_copy[1:]:  # later requests hit the same blocks
        assert req.num_cached_tokens >= num_blocks * BLOCK_SIZE
    assert_clean(scheduler)


def test_prefix_caching_for_multi_turn():
    CHUNK_SIZE, BLOCK_SIZE, num_prompt_tokens, num_output_tokens = 1000, 16, 100, 200
    scheduler = create_scheduler(max_num_batched_tokens=CHUNK_SIZE, enable_prefix_caching=True, block_size=BLOCK_SIZE)
    runner = FakeModelRunner()
    requests = create_requests(num_requests=5, num_tokens=num_prompt_tokens, max_tokens=num_output_tokens)
    for req in requests:
        scheduler.add_request(req)
    sched_outputs: deque[SchedulerOutput] = deque([scheduler.schedule(), scheduler.schedule()])
    run_queue(scheduler, runner, sched_outputs)
    assert scheduler.get_num_unfinished_requests() == 0

    # Next turn: each prompt is the whole previous conversation. The blocks the outputs filled were registered
    # when their tokens arrived (one step after they were scheduled), so they are hits now.
    next_turn = [Request(f"next{i}", list(r.all_token_ids), r.sampling_params) for i, r in enumerate(requests)]
    for req in next_turn:
        scheduler.add_request(req)
    scheduler.schedule()
    for req in next_turn:
        assert req.num_cached_tokens == req.num_prompt_tokens // BLOCK_SIZE * BLOCK_SIZE


def test_chunked_prefill_chunks_pipeline_and_only_the_last_one_samples():
    """§11 with two steps in flight: chunk k+1 is scheduled while chunk k runs (no token needed); the chunk
    that ends the prompt gets the placeholder; the first decode follows it at once."""
    scheduler = create_scheduler(max_num_batched_tokens=32)
    runner = FakeModelRunner()
    req = make_request("a", 70, max_tokens=3)
    scheduler.add_request(req)
    outs = [scheduler.schedule() for _ in range(3)]  # three chunks, none waits for an output
    assert [o.num_scheduled_tokens["a"] for o in outs] == [32, 32, 6]
    assert req.num_output_placeholders == 1  # only the last chunk samples
    fourth = scheduler.schedule()
    assert fourth.num_scheduled_tokens == {"a": 1} and fourth.decode_req_ids == {"a"}
    for out in [*outs, fourth]:
        scheduler.update_from_output(out, runner.execute_model(out))
    assert list(req.output_token_ids) == [runner.true_token("a", 70), runner.true_token("a", 71)]
    assert req.num_output_placeholders == 0


def test_reconfigure_refuses_to_switch_async_scheduling():
    from minivllm.config import SchedulerConfig

    scheduler = create_scheduler()
    with pytest.raises(ValueError, match="async_scheduling cannot change"):
        scheduler.reconfigure(SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=64, max_model_len=1024))


@st.composite
def _workloads(draw):
    block_size = draw(st.sampled_from([1, 8, 16]))
    max_model_len = draw(st.integers(16, 120))
    min_blocks = -(-max_model_len // block_size) + 1
    return dict(
        block_size=block_size,
        max_model_len=max_model_len,
        budget=draw(st.integers(8, 200)),
        num_blocks=draw(st.integers(min_blocks, min_blocks * 3)),  # small pools: preemptions
        caching=draw(st.booleans()),
        requests=[
            (draw(st.integers(1, max_model_len - 1)), draw(st.integers(1, 12)), draw(st.integers(0, 6)))
            for _ in range(draw(st.integers(1, 8)))
        ],
    )


@settings(deadline=None)
@given(_workloads())
def test_random_workloads_end_with_the_models_tokens_and_every_block_back(w):
    """Two steps in flight, arrivals between updates, tiny pools: each request ends with exactly its
    max_tokens (capped by max_model_len) tokens, the fake model's own, as a synchronous run gives them."""
    scheduler = make_scheduler(
        async_scheduling=True,
        max_num_batched_tokens=w["budget"],
        max_num_seqs=min(8, w["budget"]),
        max_model_len=w["max_model_len"],
        block_size=w["block_size"],
        num_gpu_blocks=w["num_blocks"],
        enable_prefix_caching=w["caching"],
    )
    runner = FakeModelRunner()
    reqs = [
        make_request(f"r{i}", [7] * 3 + [1000 * i + j for j in range(n)], m)
        for i, (n, m, _) in enumerate(w["requests"])
    ]
    arrivals = sorted(range(len(reqs)), key=lambda i: w["requests"][i][2])
    in_flight: deque[SchedulerOutput] = deque()
    step = 0
    while arrivals or in_flight or scheduler.has_unfinished_requests():
        while arrivals and w["requests"][arrivals[0]][2] <= step:
            r = reqs[arrivals.pop(0)]
            if r.num_prompt_tokens <= w["max_model_len"]:
                scheduler.add_request(r)
        if len(in_flight) < 2:
            out = scheduler.schedule()
            if out.num_scheduled_tokens:
                in_flight.append(out)
        if in_flight and (len(in_flight) == 2 or not out.num_scheduled_tokens):
            done = in_flight.popleft()
            scheduler.update_from_output(done, runner.execute_model(done))
        step += 1
        assert step < 5000
    for r in reqs:
        if r.num_prompt_tokens > w["max_model_len"]:
            continue
        n = min(r.max_tokens, max(1, w["max_model_len"] - r.num_prompt_tokens))  # check_stop after each token
        assert list(r.output_token_ids) == [runner.true_token(r.request_id, r.num_prompt_tokens + i) for i in range(n)]
    assert_clean(scheduler)


def test_no_decode_is_scheduled_past_max_model_len():
    """vLLM 0.10's cap: a request whose next token will reach max_model_len gets no placeholder decode at the
    last position (its token could only be discarded). A prompt of max_model_len tokens still runs whole."""
    scheduler = create_scheduler(max_num_batched_tokens=16, max_model_len=20)
    runner = FakeModelRunner()
    near, full = make_request("near", 17, max_tokens=10), make_request("full", 20, max_tokens=10)
    scheduler.add_request(near)
    scheduler.add_request(full)
    sched_outputs: deque[SchedulerOutput] = deque([scheduler.schedule(), scheduler.schedule()])
    positions: dict[str, list[int]] = {"near": [], "full": []}

    def note():
        out = sched_outputs[0]
        for req_id, c in out.num_computed_tokens.items():
            positions[req_id] += list(range(c, c + out.num_scheduled_tokens[req_id]))

    run_queue(scheduler, runner, sched_outputs, each=note)
    assert max(positions["near"]) == 18 and positions["full"] == list(range(20))  # never position 19 for "near"
    assert near.num_output_tokens == 3 and full.num_output_tokens == 1  # 20 tokens each: length-capped
    assert_clean(scheduler)


def test_the_synchronous_update_drops_stopped_requests_from_running_whatever_their_status():
    """0.8.5's rule kept by the refactor that gave the AsyncScheduler its walk: vLLM 0.8.5's own
    test_stop_via_update_from_output fills ``running`` by hand with requests still marked WAITING."""
    scheduler = create_scheduler(async_scheduling=False)
    a, b = make_request("a", 4, max_tokens=1), make_request("b", 4, max_tokens=5)
    for r in (a, b):
        scheduler.requests[r.request_id] = r
        scheduler.running.append(r)  # status left WAITING, as in vLLM's test
        r.num_computed_tokens = 4
    out = SchedulerOutput([], [], {"a": 1, "b": 1}, 2, {}, set())
    scheduler.update_from_output(out, ModelRunnerOutput(["a", "b"], {"a": 0, "b": 1}, [[7], [8]]))
    assert scheduler.running == [b] and a.status == RequestStatus.FINISHED_LENGTH_CAPPED
