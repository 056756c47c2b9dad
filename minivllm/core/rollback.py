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

Requests that were not scheduled in the failed step are untouched. The Scheduler does all of it
(``Scheduler.roll_back_step``: it stays the only writer of its queues and of ``Request``); this module
holds what the engine needs to decide whom to blame: :class:`RequestError` and :func:`culprits`.
"""

from __future__ import annotations

from minivllm.core.output import SchedulerOutput


class RequestError(Exception):
    """A failure that belongs to some requests only; runners raise it to say which."""

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
