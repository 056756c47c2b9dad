"""EngineTrace: what happened in every step, and to every request, and when (§11.1.3, §11.9).

The single source for metrics, figures and widgets. Times are seconds on the
engine's clock (``time.perf_counter`` for the real engine, virtual time for the
simulator). vLLM keeps the same facts as request events (QUEUED, SCHEDULED,
PREEMPTED) and per-iteration stats (``vllm/v1/metrics/stats.py``).

Observers (``EngineTrace.observers``) are told of each step and each finished request as it happens,
the way vLLM's engine hands ``IterationStats`` to its stat loggers (``vllm/v1/metrics/loggers.py``):
``minivllm.serving.metrics.loggers`` keeps the live Prometheus counters that way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from minivllm.core.output import EngineCoreOutputs, SchedulerOutput, SchedulerStats


@dataclass
class BlockSnapshot:
    """The block pool (owner, ref_cnt, hash per block) and every request's block table, after a step."""

    block_pool: list[dict[str, Any]]
    block_tables: dict[str, list[int]]


@dataclass
class StepRecord:
    """One engine step: who got how many tokens of the budget, and how long it took."""

    step: int
    start: float
    end: float
    token_budget: int
    prefill_tokens: dict[str, int]  # prompt (or recomputed) tokens per request
    decode_tokens: dict[str, int]  # 1 per decoding request
    spec_tokens: dict[str, int]  # drafts verified this step
    num_running: int  # after the step
    num_waiting: int
    kv_usage: float
    preempted: list[str]
    new_requests: list[str]  # admitted for the first time or resumed
    prefix_cache_hit_tokens: dict[str, int]  # tokens found in the cache at admission
    finished: list[str] = field(default_factory=list)
    spec_accepted: dict[str, int] = field(default_factory=dict)  # drafts accepted this step (§11.8.2)
    block_pool: list[dict[str, Any]] | None = None  # optional snapshot (small pools)
    block_tables: dict[str, list[int]] | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def num_scheduled_tokens(self) -> int:
        return sum(self.prefill_tokens.values()) + sum(self.decode_tokens.values()) + sum(self.spec_tokens.values())


@dataclass
class RequestRecord:
    """One request's timeline."""

    request_id: str
    arrival_time: float
    num_prompt_tokens: int
    first_scheduled_time: float | None = None
    token_times: list[float] = field(default_factory=list)  # when each output token came out
    finish_time: float | None = None
    finish_reason: str | None = None
    num_preemptions: int = 0
    num_cached_tokens: int = 0  # prefix-cache hit tokens at first admission

    @property
    def first_token_time(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def ttft(self) -> float | None:
        return None if not self.token_times else self.token_times[0] - self.arrival_time

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first: (last - first token) / (tokens - 1); None below two tokens."""
        n = len(self.token_times)
        return None if n < 2 else (self.token_times[-1] - self.token_times[0]) / (n - 1)

    @property
    def itls(self) -> list[float]:
        """Inter-token latencies: gaps between consecutive output tokens."""
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_times)


class TraceObserver(Protocol):
    """Told of events as they are recorded; each callback should cost what the event touched."""

    def on_step(self, trace: EngineTrace, record: StepRecord, new_tokens: dict[str, int]) -> None:
        """After a step is folded in: ``new_tokens[r]`` tokens were appended to ``trace.requests[r]``."""

    def on_request_finished(self, rec: RequestRecord) -> None:
        """After ``rec.finish_time`` / ``finish_reason`` are set (stop, length, abort, ...)."""


@dataclass
class EngineTrace:
    steps: list[StepRecord] = field(default_factory=list)
    requests: dict[str, RequestRecord] = field(default_factory=dict)
    block_size: int = 16  # of the KV cache the run used (figures turn tokens into blocks with it)
    observers: list[TraceObserver] = field(default_factory=list, compare=False, repr=False)
    num_steps_recorded: int = field(default=0, compare=False)  # the next StepRecord.step, kept when steps drop
    max_steps: int | None = field(default=None, compare=False)  # None: keep every step (offline runs)

    def on_abort(self, request_id: str, now: float) -> None:
        """An abort between steps (client gone, ``abort_request``): the request finishes at ``now``."""
        rec = self.requests[request_id]
        if rec.finish_time is not None:
            return
        rec.finish_time, rec.finish_reason = now, "abort"
        for observer in self.observers:
            observer.on_request_finished(rec)

    def on_arrival(self, request_id: str, arrival_time: float, num_prompt_tokens: int) -> None:
        self.requests[request_id] = RequestRecord(request_id, arrival_time, num_prompt_tokens)

    def record_step(
        self,
        out: SchedulerOutput,
        core: EngineCoreOutputs,
        start: float,
        end: float,
        blocks: BlockSnapshot | None = None,
    ) -> StepRecord:
        """Fold one step into the trace: the scheduler's decisions ``out``, what ``update_from_output``
        reported (``core``: new tokens, finishes, the scheduler's stats), the step's times on the engine's
        clock, and optionally the block pool and block tables after the step."""
        stats = core.scheduler_stats or SchedulerStats()
        prefill, decode, spec, hits = {}, {}, {}, {}
        for req_id, n in out.num_scheduled_tokens.items():
            k = len(out.scheduled_spec_decode_tokens.get(req_id, ()))
            d = int(req_id in out.decode_req_ids)
            prefill[req_id], decode[req_id], spec[req_id] = n - k - d, d, k
        admitted = [r.req_id for r in out.scheduled_new_reqs] + [
            r.req_id for r in out.scheduled_cached_reqs if r.resumed_from_preemption
        ]
        for new in out.scheduled_new_reqs:
            hits[new.req_id] = new.num_computed_tokens
            rec = self.requests[new.req_id]
            rec.first_scheduled_time = start
            rec.num_cached_tokens = new.num_computed_tokens
        for cached in out.scheduled_cached_reqs:
            if cached.resumed_from_preemption:
                hits[cached.req_id] = cached.num_computed_tokens
        for req_id in out.preempted_req_ids:
            self.requests[req_id].num_preemptions += 1
        new_tokens = {o.request_id: len(o.new_token_ids) for o in core.outputs}
        finished = [o.request_id for o in core.outputs if o.finished]
        for o in core.outputs:
            rec = self.requests[o.request_id]
            rec.token_times.extend([end] * len(o.new_token_ids))
            if o.finished:
                rec.finish_time, rec.finish_reason = end, o.finish_reason
        step = max(self.num_steps_recorded, len(self.steps))  # == index until old steps are dropped
        self.num_steps_recorded = step + 1
        record = StepRecord(
            step=step,
            start=start,
            end=end,
            token_budget=out.token_budget,
            prefill_tokens={r: v for r, v in prefill.items() if v},
            decode_tokens={r: v for r, v in decode.items() if v},
            spec_tokens={r: v for r, v in spec.items() if v},
            spec_accepted=dict(stats.spec_accepted),
            num_running=stats.num_running_reqs,
            num_waiting=stats.num_waiting_reqs,
            kv_usage=stats.gpu_cache_usage,
            preempted=sorted(out.preempted_req_ids),
            new_requests=admitted,
            prefix_cache_hit_tokens=hits,
            finished=finished,
            block_pool=blocks.block_pool if blocks is not None else None,
            block_tables=blocks.block_tables if blocks is not None else None,
        )
        self.steps.append(record)
        for observer in self.observers:
            observer.on_step(self, record, new_tokens)
            for req_id in finished:
                observer.on_request_finished(self.requests[req_id])
        if self.max_steps is not None and len(self.steps) > self.max_steps:
            self._drop_oldest_half()
        return record

    def _drop_oldest_half(self) -> None:
        """Keep memory bounded (a server runs forever): forget the older half of the steps and the requests
        that finished before the first step kept. ``num_steps_recorded`` keeps counting."""
        del self.steps[: len(self.steps) // 2]
        first_kept = self.steps[0].start
        old = [r.request_id for r in self.requests.values() if r.finish_time is not None and r.finish_time < first_kept]
        for request_id in old:
            del self.requests[request_id]
