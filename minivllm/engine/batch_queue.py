"""BatchQueue: up to two scheduled steps in flight, run in order on one worker thread (async scheduling, §11.3).

Mirrors the ``batch_queue`` of ``vllm/v1/engine/core.py`` (``EngineCore.step_with_batch_queue``, vLLM 0.10) and
the executor it feeds (with ``async_scheduling`` vLLM's multiprocess executor reports
``max_concurrent_batches == 2``). vLLM runs the model in a worker process; minivllm runs it on one worker thread
of the engine's process: torch releases the GIL inside its kernels, so the engine thread schedules step N+1,
applies step N-1's tokens and detokenizes while step N computes. The runner sees its steps one after the
other, in the order scheduled, exactly as in the synchronous loop.

Not in vLLM (its engine stops on any failed step): when a step fails, the steps queued behind it are skipped
(never run), so the engine can undo them all (``AsyncScheduler.roll_back_steps``).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.worker.clock import Clock

MAX_CONCURRENT_BATCHES = 2  # vLLM's MultiprocExecutor.max_concurrent_batches with async_scheduling


class StepSkipped(Exception):
    """A queued step that never ran because an earlier one failed."""


class StepResult(NamedTuple):
    runner_output: ModelRunnerOutput
    start: float  # the runner's clock when the step began and ended, read on the worker thread
    end: float


class BatchQueue:
    """Scheduled steps and their futures, oldest first."""

    def __init__(self, execute_model: Callable[[SchedulerOutput], ModelRunnerOutput], clock: Clock) -> None:
        """``execute_model``: runs one step on the model runner (called on the worker thread only)."""
        self.execute_model = execute_model
        self.clock = clock
        self._queue: deque[tuple[SchedulerOutput, Future[StepResult]]] = deque()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minivllm-step")
        self._failed = False  # written on the worker thread only; read there before each step
        weakref.finalize(self, self._executor.shutdown, wait=False)

    def __len__(self) -> int:
        return len(self._queue)

    def full(self) -> bool:
        return len(self._queue) >= MAX_CONCURRENT_BATCHES

    def submit(self, scheduler_output: SchedulerOutput) -> None:
        """Queue a step; the worker thread runs it after the steps before it."""
        self._queue.append((scheduler_output, self._executor.submit(self._execute, scheduler_output)))

    def pop(self) -> tuple[SchedulerOutput, Future[StepResult]]:
        """The oldest step and its future (``future.result()`` waits for it)."""
        return self._queue.popleft()

    def push_front(self, scheduler_output: SchedulerOutput, future: Future[StepResult]) -> None:
        """Put back a step taken by ``pop`` whose result was not applied (the wait was interrupted)."""
        self._queue.appendleft((scheduler_output, future))

    def drain_after_failure(self) -> list[SchedulerOutput]:
        """After a step failed: wait for the steps queued behind it (skipped, never run), and re-arm."""
        skipped = []
        while self._queue:
            scheduler_output, future = self._queue.popleft()
            exc = future.exception()  # waits; StepSkipped, since the worker saw the failure first
            assert isinstance(exc, StepSkipped), exc
            skipped.append(scheduler_output)
        self._failed = False  # no step is queued now: the worker thread reads it next for a new step
        return skipped

    def _execute(self, scheduler_output: SchedulerOutput) -> StepResult:
        """On the worker thread: run one step, timed by the runner's clock."""
        if self._failed:
            raise StepSkipped()
        start = self.clock.now()
        try:
            runner_output = self.execute_model(scheduler_output)
        except BaseException:
            self._failed = True
            raise
        return StepResult(runner_output, start, self.clock.now())
