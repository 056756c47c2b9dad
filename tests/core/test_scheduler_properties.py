"""Property tests: random workloads and configs, invariants after every step (§11.3-§11.8).

Hypothesis draws arrivals, prompt lengths with shared prefixes, budgets,
thresholds, tiny pools that force preemption, priorities, aborts, drafts,
grammars and chunking on/off; the engine loop runs with the fake runner.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from minivllm.core.kv_cache_manager import cdiv
from minivllm.lab.testbench import make_scheduler
from minivllm.request import Request, RequestStatus
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner
from tests.helpers.grammar import SlowGrammar

PREFIXES = [list(range(100, 164)), list(range(200, 240)), []]


@st.composite
def scenarios(draw):
    block_size = draw(st.sampled_from([1, 8, 16]))
    max_model_len = draw(st.integers(16, 160))
    chunked = draw(st.booleans())
    max_num_seqs = draw(st.integers(1, 8))
    low = max(max_num_seqs, max_model_len if not chunked else 1)
    budget = draw(st.integers(low, max(low, 200)))
    threshold = draw(st.integers(0, max_model_len)) if chunked else 0
    min_blocks = cdiv(max_model_len, block_size) + 1
    num_blocks = draw(st.integers(min_blocks, min_blocks * 4))
    requests = []
    for i in range(draw(st.integers(1, 10))):
        prefix = draw(st.sampled_from(PREFIXES))
        tail = draw(st.integers(1, max_model_len))
        prompt = (prefix + [1000 * (i + 1) + j for j in range(tail)])[: draw(st.integers(1, max_model_len))]
        requests.append(
            dict(
                req_id=f"r{i}",
                prompt=prompt,
                max_tokens=draw(st.integers(1, 12)),
                arrival_step=draw(st.integers(0, 12)),
                priority=draw(st.integers(0, 3)),
                abort_step=draw(st.one_of(st.none(), st.integers(0, 30))),
                grammar_delay=draw(st.one_of(st.none(), st.integers(0, 3))),
            )
        )
    return dict(
        sched=dict(
            max_num_batched_tokens=budget,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            long_prefill_token_threshold=threshold,
            enable_chunked_prefill=chunked,
            policy=draw(st.sampled_from(["fcfs", "priority"])),
            block_size=block_size,
            num_gpu_blocks=num_blocks,
            enable_prefix_caching=draw(st.booleans()),
        ),
        num_spec_tokens=draw(st.sampled_from([0, 0, 2])),
        requests=requests,
    )


def check_invariants(s, out=None):
    kv = s.kv_cache_manager
    pool = kv.block_pool
    owners = Counter(b.block_id for blocks in kv.req_to_blocks.values() for b in blocks)
    free_ids = {b.block_id for b in pool.free_block_queue.get_all_free_blocks()}
    assert len(free_ids) == pool.get_num_free_blocks()
    for block in pool.blocks[1:]:
        assert block.ref_cnt == owners.get(block.block_id, 0), block
        assert not (block.block_id in free_ids and owners.get(block.block_id)), block
        assert (block.ref_cnt == 0) == (block.block_id in free_ids), block
    assert 0 not in owners  # the null block is never handed out
    for r in s.requests.values():
        assert 0 <= r.num_computed_tokens <= r.num_tokens_with_spec
        assert len(kv.req_to_blocks.get(r.request_id, [])) * kv.block_size >= r.num_computed_tokens
    assert len(s.running) <= s.max_num_running_reqs
    if out is not None:
        assert out.total_num_scheduled_tokens == sum(out.num_scheduled_tokens.values())
        assert out.total_num_scheduled_tokens <= s.max_num_scheduled_tokens
        for req_id, n in out.num_scheduled_tokens.items():
            assert n > 0
            if s.long_prefill_token_threshold:
                assert n <= s.long_prefill_token_threshold
            r = s.requests[req_id]
            assert r.status == RequestStatus.RUNNING


@settings(  # max_examples from the profile (tests/conftest.py): dev 100, ci 1,000
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenarios())
def test_random_workloads_keep_every_invariant_and_finish(scenario):
    s = make_scheduler(**scenario["sched"])
    runner = FakeModelRunner(num_spec_tokens=scenario["num_spec_tokens"])
    all_requests: dict[str, Request] = {}
    pending = sorted(scenario["requests"], key=lambda r: r["arrival_step"])
    step_no = 0
    while pending or s.has_unfinished_requests():
        assert step_no < 3000, "the engine stopped making progress"
        while pending and pending[0]["arrival_step"] <= step_no:
            spec = pending.pop(0)
            grammar = None if spec["grammar_delay"] is None else SlowGrammar(spec["grammar_delay"])
            r = Request(
                spec["req_id"],
                spec["prompt"],
                SamplingParams(max_tokens=spec["max_tokens"], ignore_eos=True),
                arrival_time=float(step_no),
                priority=spec["priority"],
                grammar=grammar,
            )
            s.add_request(r)
            all_requests[r.request_id] = r
        for spec in scenario["requests"]:
            if spec["abort_step"] == step_no and spec["req_id"] in s.requests:
                s.finish_requests(spec["req_id"], RequestStatus.FINISHED_ABORTED)
        check_invariants(s)
        out = s.schedule()
        check_invariants(s, out)
        before = {r: s.requests[r].num_computed_tokens for r in out.scheduled_spec_decode_tokens}
        s.update_from_output(out, runner.execute_model(out))
        check_invariants(s)
        if out.preempted_req_ids:
            event("a request was preempted")
        if any(r.num_computed_tokens < before[r.request_id] for r in s.requests.values() if r.request_id in before):
            event("a draft was rejected")
        if any(n.num_computed_tokens for n in out.scheduled_new_reqs):
            event("a prefix-cache hit")
        if any(c.resumed_from_preemption and c.num_computed_tokens for c in out.scheduled_cached_reqs):
            event("a resumed request recovered blocks from the cache")
        step_no += 1
    for r in all_requests.values():
        assert r.is_finished() and r.get_finished_reason() in ("stop", "length", "abort")
        if r.status != RequestStatus.FINISHED_ABORTED:
            assert r.num_output_tokens == min(r.max_tokens, s.max_model_len - r.num_prompt_tokens) or (
                r.num_prompt_tokens + r.num_output_tokens >= s.max_model_len
            )
    pool = s.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1
    assert not s.kv_cache_manager.req_to_blocks and not s.requests
