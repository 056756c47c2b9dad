"""AsyncScheduler: schedule step N+1 while step N runs; step N's tokens arrive one step late (§11.3, §11.4).

Mirrors ``vllm/v1/core/sched/async_scheduler.py`` (vLLM 0.10.1, ``async_scheduling=True``; the engine side is
``EngineCore.step_with_batch_queue`` in ``vllm/v1/engine/core.py``, here ``LLMEngine._step_async`` and
``minivllm.engine.batch_queue``).

The synchronous loop is schedule -> execute -> update: the host (scheduling, then appending tokens, stop checks,
detokenizing) and the device take turns, so the device idles during the host's part. Async scheduling keeps
two steps in flight: while step N runs, the host applies step N-1's outputs and schedules step N+1. Step N+1
is therefore decided before step N's sampled tokens are known. §11's "one integer" view makes this small:

* A request whose step N will sample a token gets an **output placeholder** (``num_output_placeholders``) when
  step N is scheduled. The running loop chases ``num_tokens + num_output_placeholders``, so the request's decode
  is scheduled again in step N+1 with an input token the scheduler has not seen. The model runner supplies
  it: it kept step N's sampled ids in its own mirror of the request (vLLM's runner does the same).
* Chunked prefill: a prompt's middle chunks sample nothing, so they get no placeholder; chunk k+1 is scheduled
  while chunk k runs (the runner computes them in order). Only the chunk that reaches the prompt's end
  samples a token, and only the request's next step (its first decode) needs that token as input. The
  token budget is spent exactly as in the synchronous loop (a placeholder counts as one token of the
  decode); but KV blocks are held one step longer by requests that are about to finish, so under KV pressure
  async scheduling may preempt where synchronous scheduling would not.
* Stops arrive one step late: EOS, max_tokens, a stop string found in step N's token is seen after step
  N+1 was scheduled. Step N+1's extra token is computed and then discarded: ``update_from_output`` skips a
  request that has finished (vLLM does the same; its own tests count ``num_output_tokens == max_tokens``).
* Prefix caching: a block is registered once its tokens are known, so a block that a placeholder fills is
  registered when the token arrives (``KVCacheManager.cache_blocks``).
* ``update_from_output`` walks the step's scheduled requests, not ``running`` (vLLM 0.10's rule): a request
  preempted by step N+1's scheduling still gets step N's token.

Not supported, refused by the config or the engine: speculative decoding (as vLLM 0.10) and guided decoding
(vLLM 0.10 lists it as unsupported; the grammar mask of step N+1 would need step N's token).
"""

from __future__ import annotations

from minivllm.core.output import SchedulerOutput
from minivllm.core.scheduler import Scheduler, _StepDecisions
from minivllm.request import Request, RequestStatus


class AsyncScheduler(Scheduler):
    """The V1 scheduler with output placeholders (vLLM 0.10's ``AsyncScheduler``)."""

    def _update_after_schedule(self, step: _StepDecisions) -> None:
        """(D), then: a request whose step reaches its last known token (+ placeholders) will sample one more."""
        super()._update_after_schedule(step)
        for req_id in step.num_scheduled_tokens:
            request = self.requests[req_id]
            if request.num_computed_tokens == request.num_tokens + request.num_output_placeholders:
                request.num_output_placeholders += 1

    def _max_positions_left(self, request: Request) -> int:
        """As vLLM 0.10 (``max_model_len - 1 - num_computed_tokens``) for a request waiting on a token: its
        decode at position ``max_model_len - 1`` could only follow a token that ends it by length, so it is not
        scheduled. (Only then: a prompt of ``max_model_len`` tokens still gets all its positions.)"""
        left = super()._max_positions_left(request)
        return max(left - 1, 0) if request.num_output_placeholders else left

    def _requests_to_update(self, scheduler_output: SchedulerOutput) -> list[Request]:
        """Every request of the step that is still in the scheduler, running or preempted since (vLLM 0.10);
        a finished or aborted one is skipped, and its extra token with it."""
        return [r for req_id in scheduler_output.num_scheduled_tokens if (r := self.requests.get(req_id)) is not None]

    def _update_request_with_output(self, request: Request, generated: list[int]) -> tuple[list[int], bool]:
        """Append as the Scheduler does; each token arriving fills a placeholder, and the blocks its arrival
        completes join the prefix cache (a preempted request has no blocks to register)."""
        status_before = request.status
        generated, stopped = super()._update_request_with_output(request, generated)
        request.num_output_placeholders -= len(generated)
        assert request.num_output_placeholders >= 0
        if status_before == RequestStatus.RUNNING:
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens - request.num_output_placeholders)
        return generated, stopped

    def roll_back_steps(self, outputs: list[SchedulerOutput], failed: list[str], reason: str) -> list[str]:
        """Undo the steps in flight when the oldest of them failed (the later ones never ran; not in vLLM, see
        ``minivllm.core.rollback``). Every request of those steps is recomputed (or, admitted by them, put back
        in ``waiting``); ``failed`` are aborted. Blocks some step would have filled may also belong to requests
        preempted or finished since, so every cached block not in use forgets its hash. Returns the re-queued ids."""
        first: dict[str, int] = {}  # each request's num_computed_tokens before its first step in flight
        new: list[str] = []
        for out in outputs:
            for req_id, num_computed in out.num_computed_tokens.items():
                first.setdefault(req_id, num_computed)
            new += [r.req_id for r in out.scheduled_new_reqs]
            self.finished_req_ids |= out.finished_req_ids  # the runner may not have seen them
            self.preempted_since_last_step |= out.preempted_req_ids
        for req_id, num_computed in first.items():
            self.kv_cache_manager.uncache_blocks(req_id, num_computed)
        requeued: list[str] = []
        for req_id in first:
            request = self.requests.get(req_id)
            if request is None:
                continue
            request.num_output_placeholders = 0  # no step in flight will deliver them now
            if req_id in failed:
                request.stop_reason = reason
                self.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
                continue
            requeued.append(req_id)
        # Preempted while a step was in flight: already waiting, from its tokens. The others, as roll_back_step:
        # first admissions back at the head as if never admitted, the rest preempted in front of them.
        running = [r for r in requeued if self.requests[r].status == RequestStatus.RUNNING]
        for req_id in reversed([r for r in running if r in new]):
            self._unadmit(self.requests[req_id])
        for req_id in reversed([r for r in running if r not in new]):
            self.preempt_request(req_id)
        self.kv_cache_manager.block_pool.evict_free_cached_blocks()
        return requeued
