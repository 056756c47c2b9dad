"""What each request did in each step, and what each preemption cost: plain data from an EngineTrace.

No plotly here: the figure builders (gantt.py, recovery.py) and the widgets draw these
dataclasses, and the tests check them against the trace directly.

* :func:`request_segments` (§11.1.3): per request its queued time, prefill chunks, decode
  steps and preempted gaps. Segments of one step share that step's start and end, which is
  why a long prefill chunk makes every decoding request stall together.
* :func:`recovery_events` (§11.5): per preemption, the tokens the request held, how many
  came back from the prefix cache at resumption (path A) and how many were recomputed (path B).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from minivllm.metrics.trace import EngineTrace

KINDS = ("queued", "prefill", "decode", "preempted")


@dataclass
class Segment:
    """One bar of the latency Gantt: ``kind`` of work (or waiting) from ``start`` to ``end`` seconds."""

    request_id: str
    kind: str  # one of KINDS
    start: float
    end: float
    step: int | None = None  # the engine step (for a preempted gap: the step that preempted it)
    tokens: int = 0  # tokens scheduled in that step (prefill chunk, or 1 + drafts for decode)

    @property
    def duration(self) -> float:
        return self.end - self.start


def request_order(trace: EngineTrace) -> list[str]:
    """Request ids by arrival time (ties: by id)."""
    return [r.request_id for r in sorted(trace.requests.values(), key=lambda r: (r.arrival_time, r.request_id))]


def trace_end(trace: EngineTrace) -> float:
    """The last moment the trace knows of (last step end, else last arrival)."""
    if trace.steps:
        return trace.steps[-1].end
    return max((r.arrival_time for r in trace.requests.values()), default=0.0)


def request_segments(trace: EngineTrace) -> list[Segment]:
    """Every request's queued time, prefill chunks, decode steps and preempted gaps, in step order."""
    end_of_trace = trace_end(trace)
    segments: list[Segment] = []
    for rec in trace.requests.values():
        first = rec.first_scheduled_time
        if first is None:  # never scheduled: queued until it was aborted or the trace ended
            first = rec.finish_time if rec.finish_time is not None else end_of_trace
        if first > rec.arrival_time:
            segments.append(Segment(rec.request_id, "queued", rec.arrival_time, first))
    preempted_at: dict[str, tuple[float, int]] = {}
    for s in trace.steps:
        for req_id in s.preempted:  # before admissions: a forced preemption may resume in the same step
            preempted_at[req_id] = (s.start, s.step)
        for req_id in s.new_requests:
            if req_id in preempted_at:  # resumed: the gap since its preemption closes here
                t0, k = preempted_at.pop(req_id)
                if s.start > t0:  # (a forced preemption resumed in the same step leaves no gap)
                    segments.append(Segment(req_id, "preempted", t0, s.start, k))
        for req_id, n in s.prefill_tokens.items():
            n += s.decode_tokens.get(req_id, 0) + s.spec_tokens.get(req_id, 0)
            segments.append(Segment(req_id, "prefill", s.start, s.end, s.step, n))
        for req_id, n in s.decode_tokens.items():
            if req_id not in s.prefill_tokens:
                segments.append(Segment(req_id, "decode", s.start, s.end, s.step, n + s.spec_tokens.get(req_id, 0)))
    for req_id, (t0, k) in preempted_at.items():  # never resumed (yet)
        last = trace.requests.get(req_id)
        end = last.finish_time if last is not None and last.finish_time is not None else end_of_trace
        segments.append(Segment(req_id, "preempted", t0, max(end, t0), k))
    return segments


@dataclass
class RecoveryEvent:
    """One preemption and its recovery (§11.5).

    ``computed_before`` tokens had their K/V in the request's blocks when it was preempted;
    ``recoverable`` of them sat in full blocks that a prefix hit may return (a hit is whole
    blocks and never covers the last token). At resumption ``cached`` came back from the prefix
    cache (path A: the blocks still held their hash); ``recomputed`` were computed again (path
    B: blocks popped for reuse meanwhile, or the partial last block, never cached). ``new_tokens``
    is prefill after resumption never computed before (the rest of an unfinished prompt).
    """

    request_id: str
    preempt_step: int
    resume_step: int | None = None
    computed_before: int = 0
    recoverable: int = 0
    cached: int = 0
    recomputed: int = 0
    new_tokens: int = 0
    recompute_steps: dict[int, int] = field(default_factory=dict)  # step -> recomputed tokens in it
    blocks_before: list[int] | None = None  # block table just before the preemption (if recorded)
    blocks_after: list[int] | None = None  # block table after the resumption step (if recorded)

    @property
    def path(self) -> str:
        """A: every recoverable block came back from the cache; B: none did (all recomputed);
        A+B: the head came back, the tail was recomputed; "-": not resumed (yet)."""
        if self.resume_step is None:
            return "-"
        if self.cached == 0:
            return "B"
        return "A" if self.cached >= self.recoverable else "A+B"

    def cached_blocks(self, block_size: int) -> list[int]:
        """Block ids the resumed request got back from the prefix cache (its first cached // block_size blocks)."""
        return list((self.blocks_after or [])[: self.cached // block_size])

    def recomputed_blocks(self, block_size: int) -> list[int]:
        """Block ids whose K/V the resumed request wrote again (or for the first time)."""
        return list((self.blocks_after or [])[self.cached // block_size :])


def recovery_events(trace: EngineTrace, block_size: int = 16) -> list[RecoveryEvent]:
    """Every preemption in the trace, with what came back from the cache and what was recomputed.
    ``block_size`` (the engine's, CacheConfig's default 16) only decides ``recoverable`` / ``path``."""
    progress: dict[str, int] = {}  # tokens computed since the request's last admission
    open_events: dict[str, RecoveryEvent] = {}  # preempted, not resumed yet
    recovering: dict[str, RecoveryEvent] = {}  # resumed, still recomputing
    events: list[RecoveryEvent] = []
    prev_tables: dict[str, list[int]] | None = None
    for s in trace.steps:
        for req_id in s.preempted:
            rec = trace.requests[req_id]
            # Tokens the request had when preempted: prompt + outputs emitted before this step.
            num_tokens = rec.num_prompt_tokens + bisect_right(rec.token_times, s.start)
            ev = RecoveryEvent(req_id, s.step, computed_before=min(progress.pop(req_id, 0), num_tokens))
            if prev_tables is not None:
                ev.blocks_before = list(prev_tables.get(req_id, []))
            recovering.pop(req_id, None)
            open_events[req_id] = ev
            events.append(ev)
        for req_id in s.new_requests:
            hits = s.prefix_cache_hit_tokens.get(req_id, 0)
            progress[req_id] = hits
            opened = open_events.pop(req_id, None)
            if opened is not None:
                opened.resume_step, opened.cached = s.step, hits
                rec = trace.requests[req_id]
                num_tokens = rec.num_prompt_tokens + bisect_right(rec.token_times, s.start)
                full = min(opened.computed_before, num_tokens - 1) // block_size * block_size
                opened.recoverable = max(full, hits)
                if s.block_tables is not None:
                    opened.blocks_after = list(s.block_tables.get(req_id, []))
                recovering[req_id] = opened
        for req_id, ev in list(recovering.items()):
            n = s.prefill_tokens.get(req_id, 0)
            redo = min(n, max(ev.computed_before - ev.cached - ev.recomputed, 0))
            if redo:
                ev.recompute_steps[s.step] = redo
            ev.recomputed += redo
            ev.new_tokens += n - redo
            if s.decode_tokens.get(req_id) or req_id in s.finished:
                del recovering[req_id]  # caught up (or finished): recovery is over
        for req_id in set(s.prefill_tokens) | set(s.decode_tokens):
            progress[req_id] = progress.get(req_id, 0) + s.prefill_tokens.get(req_id, 0)
            progress[req_id] += s.decode_tokens.get(req_id, 0)
        for req_id in s.finished:
            progress.pop(req_id, None)
        if s.block_tables is not None:
            prev_tables = s.block_tables
    return events
