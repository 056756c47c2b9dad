"""Undo a scheduled step whose execution failed, so that one request's failure stays its own.

Not in vLLM (its engine core stops on any exception from the model runner, failing every request;
``vllm/v1/engine/core.py``). minivllm serves a classroom: one request with a bad seed, a bug in a
grammar or an injected fault must not end the others. ``schedule()`` has already advanced
``num_computed_tokens`` and registered in the prefix cache the blocks the step would have filled
(§11.4: the advance happens when the step is scheduled). When the runner fails, none of that KV was
written, so:

* every block that was not full before the step forgets its hash (a later prefix hit on it would
  read KV that was never computed);
* the failed requests are aborted (their blocks freed, ``stop_reason`` carries the error);
* requests admitted for the first time in this step go back to the head of ``waiting`` as if never
  admitted; the other scheduled requests are preempted, i.e. recomputed from their tokens (§11.5's
  recovery: normal operation, so their greedy tokens stay exactly the same).

Requests that were not scheduled in the failed step are untouched.
"""

from __future__ import annotations

from minivllm.core.output import SchedulerOutput
from minivllm.core.scheduler import Scheduler
from minivllm.request import RequestStatus


class RequestError(Exception):
    """A failure that belongs to some requests only; runners and hooks raise it to say which."""

    def __init__(self, request_ids: list[str] | str, message: str) -> None:
        super().__init__(message)
        self.request_ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        self.message = message


def culprits(out: SchedulerOutput, error: Exception) -> list[str]:
    """The requests a failed step is blamed on: the ones a RequestError names (if they were scheduled),
    else every request of the step (the failure cannot be told apart)."""
    scheduled = list(out.num_scheduled_tokens)
    if isinstance(error, RequestError):
        named = [r for r in error.request_ids if r in out.num_scheduled_tokens]
        if named:
            return named
    return scheduled


def roll_back_step(scheduler: Scheduler, out: SchedulerOutput, failed: list[str], reason: str) -> list[str]:
    """Undo ``out`` on ``scheduler`` (see the module docstring); return the ids that were re-queued."""
    for req_id, num_computed in out.num_computed_tokens.items():
        scheduler.kv_cache_manager.uncache_blocks(req_id, num_computed)
    scheduler.finished_req_ids |= set(out.finished_req_ids)  # the runner may not have seen them
    scheduler.preempted_since_last_step |= set(out.preempted_req_ids)
    for req_id in failed:
        request = scheduler.requests[req_id]
        request.stop_reason = reason
        scheduler.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
    new = [r.req_id for r in out.scheduled_new_reqs if r.req_id not in failed]
    others = [r.req_id for r in out.scheduled_cached_reqs if r.req_id not in failed]
    # Re-queue at the head, last first, so that the head ends in the order: running, then new.
    for req_id in reversed(new):
        _unadmit(scheduler, req_id)
    for req_id in reversed(others):
        scheduler.preempt_request(req_id)
    return others + new


def _unadmit(scheduler: Scheduler, req_id: str) -> None:
    """A request admitted for the first time in the failed step: back to WAITING, never admitted."""
    request = scheduler.requests[req_id]
    scheduler.running.remove(request)
    scheduler.kv_cache_manager.free(request)
    request.status = RequestStatus.WAITING
    request.num_computed_tokens = 0
    request.num_cached_tokens = -1
    request.spec_token_ids.clear()
    scheduler._enqueue(request, front=True)
    scheduler.finished_req_ids.add(req_id)  # the runner forgets the state it may have built for it
