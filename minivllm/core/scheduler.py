"""Scheduler: one token budget per step, RUNNING first, then WAITING (§11.3, §11.4, §11.5, §11.8).

Mirrors ``vllm/v1/core/sched/scheduler.py`` (v0.8.5; the priority policy and the
"chunking off" admission rule as in 0.9.2; ``scheduler_reserve_full_isl`` as in later vLLM, see
:meth:`Scheduler.reconfigure`). There is no prefill phase and no
decode phase: each request only has ``num_computed_tokens`` chasing
``num_tokens_with_spec``, and a step hands out tokens so that it catches up.
Chunking is nothing but the ``min()`` chain in :meth:`_num_new_tokens`.

Read one request's life top to bottom: ``add_request`` puts it in ``waiting``;
``schedule`` admits it (waiting loop), keeps feeding it (running loop) or
preempts it; ``update_from_output`` appends its sampled tokens and, once
``check_stop`` says so, frees it.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from minivllm.config import CacheConfig, SchedulerConfig, SpeculativeConfig
from minivllm.core.kv_cache_manager import KVCacheManager
from minivllm.core.kv_cache_utils import KVCacheBlock
from minivllm.core.output import (
    CachedRequestData,
    EngineCoreOutput,
    EngineCoreOutputs,
    ModelRunnerOutput,
    NewRequestData,
    SchedulerOutput,
    SchedulerStats,
    SpecDecodingStats,
)
from minivllm.request import Request, RequestStatus, check_stop


@dataclass
class _StepDecisions:
    """What one ``schedule()`` call has decided so far (vLLM keeps these as locals of ``schedule``)."""

    token_budget: int
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    req_to_new_block_ids: dict[str, list[int]] = field(default_factory=dict)
    scheduled_spec_decode_tokens: dict[str, list[int]] = field(default_factory=dict)
    scheduled_running: list[Request] = field(default_factory=list)
    scheduled_new: list[Request] = field(default_factory=list)
    scheduled_resumed: list[Request] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)

    def schedule(self, request: Request, num_tokens: int, block_ids: list[int]) -> None:
        self.req_to_new_block_ids[request.request_id] = block_ids
        self.num_scheduled_tokens[request.request_id] = num_tokens
        self.token_budget -= num_tokens


class Scheduler:
    """The V1 scheduler (§11.3).

    ``log_stats`` (vLLM's switch): report SchedulerStats with each update; off, ``update_from_output``
    returns ``scheduler_stats=None`` and the KV cache manager counts no prefix-cache stats. On by default
    here (the engine's trace reads the stats). ``speculative_config`` sizes ``SpecDecodingStats`` (vLLM
    takes both from its VllmConfig); the scheduling decisions depend on neither."""

    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        *,
        speculative_config: SpeculativeConfig | None = None,
        log_stats: bool = True,
    ) -> None:
        if cache_config.num_gpu_blocks is None:
            raise ValueError("cache_config.num_gpu_blocks must be set before building the Scheduler.")
        self.log_stats = log_stats
        self.num_spec_tokens = 0 if speculative_config is None else speculative_config.num_speculative_tokens
        self.block_size = cache_config.block_size
        self.num_usable_blocks = cache_config.num_gpu_blocks - 1  # block 0 is the null block
        self.reconfigure(scheduler_config)
        self.kv_cache_manager = KVCacheManager(
            num_gpu_blocks=cache_config.num_gpu_blocks,
            block_size=cache_config.block_size,
            max_model_len=self.max_model_len,
            enable_caching=cache_config.enable_prefix_caching,
            caching_hash_algo=cache_config.prefix_caching_hash_algo,
            log_stats=log_stats,
        )
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()  # finished since the last schedule()
        self.failed_requests: list[Request] = []  # failed before running (e.g. grammar errors)
        self.preempted_since_last_step: set[str] = set()  # incl. preempt_request() between steps

    def reconfigure(self, scheduler_config: SchedulerConfig) -> None:
        """Take a new (validated) SchedulerConfig; it applies from the next schedule() on.
        max_model_len and the policy cannot change while requests are queued under them.

        ``scheduler_reserve_full_isl`` (later vLLM, PR #37307; True by default there, off here because minivllm
        mirrors 0.8.5): the waiting loop admits a request only if the free blocks can hold its whole current
        sequence, ``allocate_slots(..., full_sequence_must_fit=True)``; otherwise admission stops for the step,
        as after a failed allocation (nobody is preempted). With it on, a sequence longer than the whole pool
        could never be admitted and would wait forever, so the scheduler refuses ``max_model_len`` above the
        pool's capacity, as vLLM's engine does at start-up (LLMEngine refuses it whatever the flag)."""
        old = getattr(self, "scheduler_config", None)
        if old is not None and (scheduler_config.max_model_len, scheduler_config.policy) != (
            old.max_model_len,
            old.policy,
        ):
            raise ValueError("max_model_len and policy cannot change on a running scheduler.")
        if old is not None and scheduler_config.async_scheduling != old.async_scheduling:
            raise ValueError("async_scheduling cannot change on a running scheduler (it picks the scheduler class).")
        sc = scheduler_config
        # SchedulerConfig.__post_init__ resolves these from the other settings when they are left None.
        assert sc.max_num_seqs is not None and sc.max_num_batched_tokens is not None and sc.max_model_len is not None
        capacity = self.num_usable_blocks * self.block_size
        if sc.scheduler_reserve_full_isl and sc.max_model_len > capacity:
            raise ValueError(
                f"scheduler_reserve_full_isl=True needs max_model_len ({sc.max_model_len}) <= the KV cache's "
                f"capacity ({capacity} tokens = {self.num_usable_blocks} usable blocks x {self.block_size}): a "
                "longer request could never fit whole and would wait forever. Lower max_model_len, give the "
                "cache more blocks, or turn scheduler_reserve_full_isl off."
            )
        self.scheduler_config = sc
        self.max_num_running_reqs: int = sc.max_num_seqs
        self.max_num_scheduled_tokens: int = sc.max_num_batched_tokens
        self.max_model_len: int = sc.max_model_len
        self.long_prefill_token_threshold = scheduler_config.long_prefill_token_threshold
        self.policy = scheduler_config.policy

    # ------------------------------------------------------------------ requests in and out
    def add_request(self, request: Request) -> None:
        """Queue a request, or raise ValueError leaving the scheduler untouched."""
        if request.request_id in self.requests:
            raise ValueError(f"request_id {request.request_id!r} is already in the scheduler.")
        if request.num_prompt_tokens == 0:
            raise ValueError(f"request {request.request_id!r}: the prompt is empty; it needs at least 1 token.")
        if request.num_prompt_tokens > self.max_model_len:
            raise ValueError(
                f"request {request.request_id!r}: the prompt (length {request.num_prompt_tokens}) is longer than "
                f"max_model_len ({self.max_model_len}); allowed prompt length is 1..{self.max_model_len}."
            )
        if request.max_tokens < 1:
            raise ValueError(
                f"request {request.request_id!r}: max_tokens must be at least 1, got {request.max_tokens}."
            )
        self._enqueue(request, front=False)
        self.requests[request.request_id] = request

    def finish_requests(self, request_ids: str | list[str], finished_status: RequestStatus) -> None:
        """End requests from outside (abort): free their blocks wherever they are."""
        if not RequestStatus.is_finished(finished_status):
            raise ValueError(f"finished_status must be a FINISHED_* status, got {finished_status.name}.")
        for req_id in [request_ids] if isinstance(request_ids, str) else request_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove(request)
            request.status = finished_status
            self._free_request(request)

    def _fail_request(self, request: Request, reason: str) -> None:
        request.status = RequestStatus.FINISHED_ABORTED
        request.stop_reason = reason
        self.failed_requests.append(request)
        self._free_request(request)

    def _free_request(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        self.kv_cache_manager.free_block_hashes(request)
        del self.requests[request.request_id]
        self.finished_req_ids.add(request.request_id)

    def _enqueue(self, request: Request, front: bool) -> None:
        """FCFS: tail (new) or head (preempted). Priority: by (priority, arrival_time)."""
        if self.policy == "priority":
            keys = [(r.priority, r.arrival_time) for r in self.waiting]
            self.waiting.insert(bisect.bisect_right(keys, (request.priority, request.arrival_time)), request)
        elif front:
            self.waiting.appendleft(request)
        else:
            self.waiting.append(request)

    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0

    # ------------------------------------------------------------------ schedule
    def _num_new_tokens(self, request: Request, num_tokens: int, num_computed: int, token_budget: int) -> int:
        """The whole of chunked prefill: how far this request may advance in this step."""
        n = num_tokens - num_computed
        if 0 < self.long_prefill_token_threshold < n:
            n = self.long_prefill_token_threshold
        return min(n, token_budget)

    def _max_positions_left(self, request: Request) -> int:
        """How many more positions a running request may compute before ``max_model_len``."""
        return self.max_model_len - request.num_computed_tokens

    def _preempt(self, request: Request) -> Request:
        """Pick and preempt a victim for ``request``: the last running request (fcfs)
        or the lowest-priority, latest-arriving one (priority)."""
        if self.policy == "priority":
            victim = max(self.running, key=lambda r: (r.priority, r.arrival_time))
        else:
            victim = self.running[-1]
        return self.preempt_request(victim.request_id)

    def preempt_request(self, request_id: str) -> Request:
        """Preempt one running request. Preemption forgets: all its blocks go back (their hashes
        stay cached) and ``num_computed_tokens`` returns to 0. Public so notebooks can force it (§11.5)."""
        victim = self.requests.get(request_id)
        if victim is None or victim.status != RequestStatus.RUNNING:
            running = [r.request_id for r in self.running]
            raise ValueError(f"request {request_id!r} is not running; running requests: {running}.")
        self.running.remove(victim)
        self.kv_cache_manager.free(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_computed_tokens = 0
        victim.spec_token_ids.clear()  # drafts refer to a state that will be recomputed
        victim.num_preemptions += 1
        self.preempted_since_last_step.add(victim.request_id)
        self._enqueue(victim, front=True)
        return victim

    def schedule(self) -> SchedulerOutput:
        """One step's decisions in vLLM's order: (A) running requests, (B) waiting requests, (C) the
        SchedulerOutput, (D) advance ``num_computed_tokens`` by what was handed out."""
        step = _StepDecisions(token_budget=self.max_num_scheduled_tokens)

        # (A) RUNNING: requests already holding blocks keep going first.
        req_index = 0
        while req_index < len(self.running) and step.token_budget > 0:
            request = self.running[req_index]
            # Placeholders (async scheduling only; always 0 here): tokens a step in flight will sample.
            n = self._num_new_tokens(
                request,
                request.num_tokens_with_spec + request.num_output_placeholders,
                request.num_computed_tokens,
                step.token_budget,
            )
            n = min(n, self._max_positions_left(request))
            if n == 0:
                req_index += 1
                continue
            new_blocks, num_undone = self._allocate_or_preempt(request, n, step)
            req_index -= num_undone
            if new_blocks is None:  # the request preempted itself: nothing left to take from
                break
            step.schedule(request, n, [b.block_id for b in new_blocks])
            step.scheduled_running.append(request)
            req_index += 1
            # Drafts count against the budget; keep only those inside this step's chunk.
            num_spec = n + request.num_computed_tokens - request.num_tokens
            del request.spec_token_ids[max(num_spec, 0) :]
            if request.spec_token_ids:
                step.scheduled_spec_decode_tokens[request.request_id] = list(request.spec_token_ids)

        # (B) WAITING: admit new and preempted requests, only if nobody was preempted.
        skipped: deque[Request] = deque()
        while not step.preempted and self.waiting and step.token_budget > 0:
            if len(self.running) >= self.max_num_running_reqs:  # >=: max_num_seqs may have been lowered
                break
            request = self.waiting[0]
            if request.status == RequestStatus.WAITING_FOR_FSM:
                grammar = request.grammar
                assert grammar is not None  # only guided requests wait for their grammar
                if not grammar.is_ready():  # §11.4.4: pass over it, keep its place
                    self.waiting.popleft()
                    if grammar.error is None:
                        skipped.appendleft(request)
                    else:  # the grammar failed to compile: this request fails, nobody else
                        self._fail_request(request, grammar.error)
                    continue
                request.status = RequestStatus.WAITING
            computed_blocks, num_computed = self.kv_cache_manager.get_computed_blocks(request)
            n = self._num_new_tokens(request, request.num_tokens, num_computed, step.token_budget)
            if not self.scheduler_config.enable_chunked_prefill and n < request.num_tokens - num_computed:
                skipped.appendleft(self.waiting.popleft())  # chunking off: it waits whole
                continue
            new_blocks = self.kv_cache_manager.allocate_slots(
                request, n, computed_blocks, full_sequence_must_fit=self.scheduler_config.scheduler_reserve_full_isl
            )
            if new_blocks is None:
                break  # out of blocks (or, reserving, for the whole sequence): wait; no preemption here
            self._admit(request, n, num_computed, computed_blocks + new_blocks, step)
        self.waiting.extendleft(skipped)  # back to the head, in their original order

        # (C) The output, then (D) advance: the tokens handed out now count as computed.
        output = self._make_output(step)
        self._update_after_schedule(step)
        return output

    def _admit(
        self, request: Request, n: int, num_computed: int, blocks: list[KVCacheBlock], step: _StepDecisions
    ) -> None:
        """The head of ``waiting`` starts running: ``num_computed`` prefix-hit tokens, ``n`` more this step."""
        self.waiting.popleft()
        self.running.append(request)
        resumed = request.status == RequestStatus.PREEMPTED
        (step.scheduled_resumed if resumed else step.scheduled_new).append(request)
        step.schedule(request, n, [b.block_id for b in blocks])
        request.status = RequestStatus.RUNNING
        request.num_computed_tokens = num_computed
        if request.num_cached_tokens < 0:
            request.num_cached_tokens = num_computed

    def _update_after_schedule(self, step: _StepDecisions) -> None:
        """(D) The tokens handed out now count as computed (vLLM names this step ``_update_after_schedule``
        from 0.9 on), and the finished / preempted ids have been sent."""
        for req_id, n in step.num_scheduled_tokens.items():
            self.requests[req_id].num_computed_tokens += n
        self.finished_req_ids = set()
        self.preempted_since_last_step = set()

    def _allocate_or_preempt(
        self, request: Request, n: int, step: _StepDecisions
    ) -> tuple[list[KVCacheBlock] | None, int]:
        """Slots for ``n`` more tokens of a running request, preempting victims until they fit.
        Under the priority policy a victim may already be scheduled this step: its turn is undone (budget
        back). Returns the new blocks (None if ``request`` preempted itself) and how many turns were undone."""
        num_undone = 0
        while True:
            new_blocks = self.kv_cache_manager.allocate_slots(request, n)
            if new_blocks is not None:
                return new_blocks, num_undone
            victim = self._preempt(request)
            step.preempted.append(victim)
            if victim in step.scheduled_running:  # priority policy: undo its turn this step
                step.scheduled_running.remove(victim)
                step.token_budget += step.num_scheduled_tokens.pop(victim.request_id)
                step.req_to_new_block_ids.pop(victim.request_id)
                step.scheduled_spec_decode_tokens.pop(victim.request_id, None)
                num_undone += 1
            if victim is request:
                return None, num_undone

    def _make_output(self, step: _StepDecisions) -> SchedulerOutput:
        """Assemble the SchedulerOutput from this step's decisions (before the advance)."""
        num_scheduled_tokens, spec = step.num_scheduled_tokens, step.scheduled_spec_decode_tokens
        total = sum(num_scheduled_tokens.values())
        assert total <= self.max_num_scheduled_tokens and step.token_budget >= 0
        assert not (step.scheduled_new or step.scheduled_resumed) or len(self.running) <= self.max_num_running_reqs
        # §11.4.4: guided requests that sample this step get their grammar's allowed tokens.
        grammar_allowed = {
            req_id: r.grammar.allowed_token_ids()
            for req_id, n in num_scheduled_tokens.items()
            if (r := self.requests[req_id]).grammar is not None and r.num_computed_tokens + n >= r.num_tokens
        }
        # A decode feeds back the request's last sampled token (async: maybe one not known yet, a placeholder);
        # every other token is prompt (or recompute).
        decode_req_ids = {
            req_id
            for req_id in num_scheduled_tokens
            if (r := self.requests[req_id]).num_computed_tokens == r.num_tokens + r.num_output_placeholders - 1
            and r.num_tokens + r.num_output_placeholders > r.num_prompt_tokens
        }

        def cached(r: Request, resumed: bool) -> CachedRequestData:
            c = r.num_computed_tokens
            n = num_scheduled_tokens[r.request_id] - len(spec.get(r.request_id, ()))
            new_token_ids = r.all_token_ids[c : c + n]  # a slice of a ConstantList is a new plain list
            return CachedRequestData(r.request_id, resumed, new_token_ids, step.req_to_new_block_ids[r.request_id], c)

        new_reqs = [
            NewRequestData(
                r.request_id,
                list(r.prompt_token_ids),
                r.sampling_params,
                step.req_to_new_block_ids[r.request_id],
                r.num_computed_tokens,
            )
            for r in step.scheduled_new
        ]
        return SchedulerOutput(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=[cached(r, True) for r in step.scheduled_resumed]
            + [cached(r, False) for r in step.scheduled_running],
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=total,
            scheduled_spec_decode_tokens=spec,
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids=self.preempted_since_last_step,
            token_budget=self.max_num_scheduled_tokens,
            grammar_allowed_token_ids=grammar_allowed,
            decode_req_ids=decode_req_ids,
        )

    # ------------------------------------------------------------------ update
    def update_from_output(
        self, scheduler_output: SchedulerOutput, runner_output: ModelRunnerOutput
    ) -> EngineCoreOutputs:
        """Append sampled tokens, roll back rejected drafts, stop and free finished requests."""
        outputs = [EngineCoreOutput(r.request_id, [], "abort", r.stop_reason) for r in self.failed_requests]
        self.failed_requests = []
        spec_accepted: dict[str, int] = {}
        spec_decoding_stats: SpecDecodingStats | None = None
        stopped_ids: set[str] = set()
        stopped_preempted: set[str] = set()  # async scheduling only: preempted while their step ran
        for request in self._requests_to_update(scheduler_output):
            req_id = request.request_id
            generated = list(runner_output.sampled_token_ids[runner_output.req_id_to_index[req_id]])
            scheduled_spec = scheduler_output.scheduled_spec_decode_tokens.get(req_id)
            if scheduled_spec:  # rejected drafts were counted as computed: take them back
                request.num_computed_tokens -= len(scheduled_spec) + 1 - len(generated)
                if self.log_stats and generated:
                    if spec_decoding_stats is None:  # sized by the config; drafts longer than it (tests) widen it
                        longest = max(map(len, scheduler_output.scheduled_spec_decode_tokens.values()))
                        spec_decoding_stats = SpecDecodingStats.new(max(self.num_spec_tokens, longest))
                    spec_decoding_stats.observe_draft(len(scheduled_spec), len(generated) - 1)
            if scheduled_spec is not None and generated:
                spec_accepted[req_id] = len(generated) - 1
            if runner_output.spec_token_ids is not None:
                request.spec_token_ids = list(runner_output.spec_token_ids[runner_output.req_id_to_index[req_id]])
            status_before = request.status
            generated, stopped = self._update_request_with_output(request, generated)
            if stopped:
                request.spec_token_ids.clear()
                self._free_request(request)
                stopped_ids.add(req_id)
                if status_before == RequestStatus.PREEMPTED:
                    stopped_preempted.add(req_id)
            if generated:
                new_logprobs = None
                if runner_output.logprobs is not None and request.sampling_params.logprobs is not None:
                    index = runner_output.req_id_to_index[req_id]  # its row (vLLM: one token per step)
                    new_logprobs = runner_output.logprobs.slice(index, index + 1)
                reason = request.get_finished_reason()
                prompt_logprobs = runner_output.prompt_logprobs_dict.get(req_id)
                outputs.append(
                    EngineCoreOutput(req_id, generated, reason, request.stop_reason, new_logprobs, prompt_logprobs)
                )
        if stopped_ids:
            self.running = [r for r in self.running if r.request_id not in stopped_ids]
        if stopped_preempted:  # stopped by the step that was running when they were preempted
            self.waiting = deque(r for r in self.waiting if r.request_id not in stopped_preempted)
        return EngineCoreOutputs(outputs, self.make_stats(spec_accepted, spec_decoding_stats))

    def _requests_to_update(self, scheduler_output: SchedulerOutput) -> list[Request]:
        """The requests whose step outputs ``update_from_output`` applies: the running ones that were scheduled
        (vLLM 0.8.5). The AsyncScheduler walks the step's scheduled requests instead (vLLM 0.10)."""
        return [r for r in self.running if scheduler_output.num_scheduled_tokens.get(r.request_id, 0) > 0]

    def _update_request_with_output(self, request: Request, generated: list[int]) -> tuple[list[int], bool]:
        """Append the sampled tokens one by one, stopping at the first that ends the request (the rest are
        dropped). Returns the tokens kept and whether the request stopped; the caller frees it."""
        for i, token_id in enumerate(generated):
            request.append_output_token_ids(token_id)
            if request.grammar is not None:
                request.grammar.accept_token(token_id)
            if check_stop(request, self.max_model_len):
                del generated[i + 1 :]
                return generated, True
        return generated, False

    def make_stats(
        self, spec_accepted: dict[str, int] | None = None, spec_decoding_stats: SpecDecodingStats | None = None
    ) -> SchedulerStats | None:
        """The SchedulerStats of the step just updated (None with ``log_stats`` off), as vLLM's
        ``make_stats``; it takes the prefix-cache counters gathered since the previous call."""
        if not self.log_stats:
            return None
        prefix_cache_stats = self.kv_cache_manager.make_prefix_cache_stats()
        assert prefix_cache_stats is not None  # the manager counts whenever log_stats is on
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting),
            gpu_cache_usage=self.kv_cache_manager.usage,
            spec_accepted=spec_accepted or {},
            prefix_cache_stats=prefix_cache_stats,
            spec_decoding_stats=spec_decoding_stats,
        )

    # ------------------------------------------------------------------ a failed step (not in vLLM)
    def roll_back_step(self, scheduler_output: SchedulerOutput, failed: list[str], reason: str) -> list[str]:
        """Undo a step whose execution failed (``minivllm.core.rollback`` says why and how): abort ``failed``
        with ``reason``, put the step's first admissions back at the head of ``waiting`` as if never admitted,
        preempt its other requests. Returns the ids of the re-queued requests."""
        out = scheduler_output
        for req_id, num_computed in out.num_computed_tokens.items():
            self.kv_cache_manager.uncache_blocks(req_id, num_computed)  # never-written KV must not be hit
        self.finished_req_ids |= out.finished_req_ids  # the runner may not have seen them
        self.preempted_since_last_step |= out.preempted_req_ids
        for req_id in failed:
            self.requests[req_id].stop_reason = reason
            self.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
        new = [r.req_id for r in out.scheduled_new_reqs if r.req_id not in failed]
        others = [r.req_id for r in out.scheduled_cached_reqs if r.req_id not in failed]
        for req_id in reversed(new):  # re-queued at the head, last first: the head ends running, then new
            self._unadmit(self.requests[req_id])
        for req_id in reversed(others):
            self.preempt_request(req_id)
        return others + new

    def _unadmit(self, request: Request) -> None:
        """A request first admitted in the failed step goes back to WAITING, never admitted."""
        self.running.remove(request)
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.WAITING
        request.num_computed_tokens, request.num_cached_tokens = 0, -1
        request.spec_token_ids.clear()
        self._enqueue(request, front=True)
        self.finished_req_ids.add(request.request_id)  # the runner forgets the state it may have built for it
