"""The data behind the Gantt and the recovery timeline equals the trace's own numbers."""

from __future__ import annotations

from collections import Counter

from minivllm.lab.viz.figures.timeline import recovery_events, request_order, request_segments
from tests.helpers.viz import make_engine, requests


def test_segments_of_a_hand_built_trace(hand_trace):
    segs = {(s.request_id, s.kind, s.start, s.end, s.step, s.tokens) for s in request_segments(hand_trace)}
    assert segs == {
        ("a", "queued", 0.0, 1.0, None, 0),
        ("b", "queued", 0.5, 1.0, None, 0),
        ("a", "prefill", 1.0, 2.0, 0, 4),
        ("b", "prefill", 1.0, 2.0, 0, 4),
        ("a", "prefill", 2.0, 3.0, 1, 2),
        ("b", "preempted", 2.0, 3.0, 1, 0),
        ("b", "prefill", 3.0, 4.0, 2, 1),
        ("a", "decode", 3.0, 4.0, 2, 1),
    }
    assert request_order(hand_trace) == ["a", "b"]


def test_segments_cover_every_scheduled_token(scene_trace):
    segs = request_segments(scene_trace)
    work = [s for s in segs if s.kind in ("prefill", "decode")]
    assert sum(s.tokens for s in work) == sum(st.num_scheduled_tokens for st in scene_trace.steps)
    by_step = Counter(s.step for s in work)
    for st in scene_trace.steps:  # one bar per scheduled request, sharing the step's start and end
        assert by_step[st.step] == len(set(st.prefill_tokens) | set(st.decode_tokens))
        for s in work:
            if s.step == st.step:
                assert (s.start, s.end) == (st.start, st.end)
    long_chunks = [s.tokens for s in segs if s.request_id == "long" and s.kind == "prefill"]
    assert sum(long_chunks) == 150 and max(long_chunks) <= 64  # chunked by the 64-token budget
    queued = {s.request_id: s for s in segs if s.kind == "queued"}
    for rid, s in queued.items():
        rec = scene_trace.requests[rid]
        assert (s.start, s.end) == (rec.arrival_time, rec.first_scheduled_time)


def test_recovery_event_of_a_hand_built_trace(hand_trace):
    (ev,) = recovery_events(hand_trace, block_size=4)
    assert (ev.request_id, ev.preempt_step, ev.resume_step) == ("b", 1, 2)
    assert (ev.computed_before, ev.recoverable, ev.cached, ev.recomputed, ev.new_tokens) == (4, 4, 4, 0, 1)
    assert ev.path == "A"


def test_forced_preemption_recovers_full_blocks_and_recomputes_the_rest():
    engine = make_engine(budget=128, blocks=64, record=True)
    for r in requests([("a", 40, 6, 0.0), ("b", 40, 6, 0.0)]):
        engine.add_request(r.request_id, r.prompt_token_ids, r.sampling_params, arrival_time=0.0)
    engine.step()
    before = engine.scheduler.kv_cache_manager.get_block_ids("a")
    engine.scheduler.preempt_request("a")
    engine.step()
    engine.trace.steps[-1].preempted = ["a"]  # what RecoveryExplorer records for a forced preemption
    (ev,) = recovery_events(engine.trace, block_size=16)
    assert ev.blocks_before == before and len(before) == 3
    assert (ev.computed_before, ev.cached, ev.recomputed) == (40, 32, 8)  # 2 full blocks back, 8 tokens redone
    assert ev.cached_blocks(16) == before[:2] and ev.path == "A"  # every full block came back


def test_eviction_forces_recompute():
    """Path B: the victim's blocks are popped for another request before it resumes."""
    engine = make_engine(budget=64, blocks=8, record=True)
    for r in requests([("a", 48, 30, 0.0), ("b", 40, 30, 0.0)]):
        engine.add_request(r.request_id, r.prompt_token_ids, r.sampling_params, arrival_time=0.0)
    while engine.has_unfinished_requests():
        engine.step()
    events = recovery_events(engine.trace, block_size=16)
    assert events, "an 8-block pool must preempt"
    assert all(e.resume_step is not None for e in events)
    assert any(e.recomputed > 0 for e in events)
    for e in events:
        assert e.cached + e.recomputed <= max(e.computed_before, e.cached)
