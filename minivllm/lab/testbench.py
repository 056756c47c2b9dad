"""The scheduler test bench: the real Scheduler driven by the fake runner, with no model and no torch.

For the tests (tests/core), the exercise checks (minivllm/lab/exercises) and the chapter notebooks: each
builds a Scheduler, adds requests, runs engine steps and looks at what the scheduler decided. It plays
the part of the helpers in vLLM's ``tests/v1/core/test_scheduler.py`` (``create_scheduler``,
``create_requests``): ``make_scheduler`` takes vLLM's engine-argument names, ``make_request`` a prompt
length or the token ids.

One engine step is what ``LLMEngine.step`` does without the engine around it: ``schedule()``, then the
runner's ``execute_model()``, then ``update_from_output()``. ``step`` runs one, ``run_steps`` runs them
(adding requests at their arrival steps) and yields each step's outputs, ``run_table`` keeps only who
got how many tokens in each step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.async_scheduler import AsyncScheduler
from minivllm.core.output import EngineCoreOutputs, SchedulerOutput
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def make_scheduler(
    *,
    max_num_batched_tokens: int = 64,
    max_num_seqs: int = 16,
    max_model_len: int = 512,
    long_prefill_token_threshold: int = 0,
    enable_chunked_prefill: bool = True,
    policy: str = "fcfs",
    block_size: int = 16,
    num_gpu_blocks: int = 100,
    enable_prefix_caching: bool = False,
    async_scheduling: bool = False,
) -> Scheduler:
    """A Scheduler with a KV cache of ``num_gpu_blocks`` blocks; small defaults, prefix caching off
    (``async_scheduling``: an AsyncScheduler, as vLLM's config picks)."""
    return (AsyncScheduler if async_scheduling else Scheduler)(
        SchedulerConfig(
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            long_prefill_token_threshold=long_prefill_token_threshold,
            enable_chunked_prefill=enable_chunked_prefill,
            policy=policy,
            async_scheduling=async_scheduling,
        ),
        CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks, enable_prefix_caching=enable_prefix_caching),
    )


def make_request(req_id: str, prompt: int | Iterable[int], max_tokens: int = 4, **kwargs: Any) -> Request:
    """A request whose prompt is ``range(prompt)`` (an int) or the given token ids; EOS ignored unless
    ``ignore_eos=False``; other ``kwargs`` go to ``Request`` (arrival_time, priority, ...)."""
    prompt = list(range(prompt)) if isinstance(prompt, int) else list(prompt)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=kwargs.pop("ignore_eos", True))
    return Request(req_id, prompt, params, **kwargs)


def step(scheduler: Scheduler, runner: FakeModelRunner) -> tuple[SchedulerOutput, EngineCoreOutputs]:
    """One engine step; returns (SchedulerOutput, EngineCoreOutputs)."""
    out = scheduler.schedule()
    return out, scheduler.update_from_output(out, runner.execute_model(out))


def run_steps(
    scheduler: Scheduler,
    runner: FakeModelRunner | None = None,
    *,
    arrivals: Iterable[tuple[int, Request]] = (),
    max_steps: int | None = None,
) -> Iterator[tuple[SchedulerOutput, EngineCoreOutputs]]:
    """Run engine steps while a request is unfinished or still to arrive (at most ``max_steps``), and
    yield each step's (SchedulerOutput, EngineCoreOutputs) once its update is done.

    ``arrivals`` are ``(step, request)`` pairs: a request is added just before the ``schedule()`` of its
    step (counted from 0), requests of the same step in the order given. Between two yields the scheduler
    is as that step left it, so a caller can read its state, or stop early (``break``).

    An AsyncScheduler runs as the async engine does (``LLMEngine``, ``async_scheduling``): two steps in
    flight, each update applied after the next step was scheduled; a step is numbered by its ``schedule()``.
    """
    runner = FakeModelRunner() if runner is None else runner
    pending = sorted(arrivals, key=lambda arrival: arrival[0])
    if isinstance(scheduler, AsyncScheduler):
        yield from _run_steps_async(scheduler, runner, pending, max_steps)
        return
    num_steps = 0
    while (pending or scheduler.has_unfinished_requests()) and (max_steps is None or num_steps < max_steps):
        while pending and pending[0][0] <= num_steps:
            scheduler.add_request(pending.pop(0)[1])
        yield step(scheduler, runner)
        num_steps += 1


def _run_steps_async(
    scheduler: AsyncScheduler, runner: FakeModelRunner, pending: list[tuple[int, Request]], max_steps: int | None
) -> Iterator[tuple[SchedulerOutput, EngineCoreOutputs]]:
    in_flight: deque[SchedulerOutput] = deque()
    num_scheduled = num_done = 0
    while (pending or in_flight or scheduler.has_unfinished_requests()) and (max_steps is None or num_done < max_steps):
        while pending and pending[0][0] <= num_scheduled:
            scheduler.add_request(pending.pop(0)[1])
        out = scheduler.schedule()
        num_scheduled += 1
        if out.num_scheduled_tokens or not in_flight:  # an empty step runs only when nothing else would
            in_flight.append(out)
        if out.num_scheduled_tokens and len(in_flight) < 2:
            continue  # fill the queue: the next step is scheduled before this one's tokens are known
        done = in_flight.popleft()
        yield done, scheduler.update_from_output(done, runner.execute_model(done))
        num_done += 1


def run_table(
    scheduler: Scheduler, runner: FakeModelRunner | None = None, max_steps: int = 1000
) -> list[dict[str, int]]:
    """Run to completion; the step table is a list of {req_id: num_scheduled_tokens}."""
    return [dict(out.num_scheduled_tokens) for out, _ in run_steps(scheduler, runner, max_steps=max_steps)]
