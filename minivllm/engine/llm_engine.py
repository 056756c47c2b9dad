"""LLMEngine: add requests, step, collect outputs (§11.3, §11.9).

Mirrors ``vllm/v1/engine/core.py`` (``EngineCore.step``) and the parts of
``vllm/v1/engine/llm_engine.py`` / ``processor.py`` that validate requests, in
one process. One step is: ``schedule()`` (decisions only), ``execute_model()``
(the real model, the fake runner or the simulator), update (``update_from_output()``:
tokens, stops, frees; then the OutputProcessor: text, stop strings, metrics), and
record (one StepRecord in the trace). Replaying a timed workload is the lab's
(``minivllm.lab.sim.run.run_workload``).

With ``async_scheduling`` (vLLM 0.10) the engine keeps two steps in flight (``minivllm.engine.batch_queue``):
each ``step()`` schedules the next step while the previous one runs on a worker thread, then applies the
oldest step's outputs (``minivllm.core.async_scheduler`` says what changes).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from minivllm.config import EngineConfig, SchedulerConfig
from minivllm.core.async_scheduler import AsyncScheduler
from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.core.rollback import RequestError, culprits
from minivllm.core.scheduler import Scheduler
from minivllm.engine.batch_queue import BatchQueue
from minivllm.engine.output_processor import OutputProcessor
from minivllm.metrics.trace import BlockSnapshot, EngineTrace
from minivllm.outputs import RequestOutput
from minivllm.request import Request, RequestStatus
from minivllm.sampling_params import SamplingParams
from minivllm.worker.base import ModelRunnerBase, Tokenizer
from minivllm.worker.clock import Clock

if TYPE_CHECKING:
    from minivllm.structured_output import GrammarCompiler

logger = logging.getLogger("minivllm.engine")


class LLMEngine:
    """The engine loop around one Scheduler and one model runner (``minivllm.worker.base.ModelRunnerBase``)."""

    def __init__(
        self,
        config: EngineConfig,
        model_runner: ModelRunnerBase | None = None,
        tokenizer: Tokenizer | None = None,
        clock: Clock | None = None,
        record_block_pool: bool = False,
        scheduler_cls: type[Scheduler] = Scheduler,
    ) -> None:
        """``scheduler_cls``: the V1 Scheduler, or a comparison baseline built on it (``minivllm.lab.baselines``);
        with ``async_scheduling`` the Scheduler becomes an AsyncScheduler, as vLLM's config picks its class."""
        self.config = config
        if model_runner is None:
            from minivllm.worker.model_runner import ModelRunner

            model_runner = ModelRunner(config)
        self.model_runner: ModelRunnerBase = model_runner
        self.tokenizer = tokenizer if tokenizer is not None else model_runner.tokenizer
        self.eos_token_id = model_runner.eos_token_id
        self.vocab_size = model_runner.vocab_size
        max_pos = model_runner.max_position_embeddings
        sc, cc = config.scheduler_config, config.cache_config
        max_model_len = sc.max_model_len
        assert max_model_len is not None  # SchedulerConfig.__post_init__ resolves it
        if max_pos is not None and max_model_len > max_pos:
            raise ValueError(
                f"max_model_len ({max_model_len}) is larger than the model's max_position_embeddings "
                f"({max_pos}); allowed max_model_len is 1..{max_pos}."
            )
        if cc.num_gpu_blocks is None:
            cc.num_gpu_blocks = model_runner.determine_num_blocks()
        num_blocks = cc.num_gpu_blocks
        model_runner.initialize_kv_cache(num_blocks)
        capacity = (num_blocks - 1) * cc.block_size  # the null block holds nothing
        if max_model_len > capacity:  # a max-length request could never fit: refuse, as vLLM does
            raise ValueError(
                f"max_model_len ({max_model_len}) is larger than the number of tokens the KV cache can hold "
                f"({capacity} = (num_gpu_blocks {num_blocks} - 1) x block_size {cc.block_size}); lower "
                "max_model_len or give the KV cache more blocks (num_gpu_blocks / kv_cache_memory_bytes)."
            )
        config.verify()  # a config changed after it was built is checked again (async + speculative decoding)
        if sc.async_scheduling and scheduler_cls is Scheduler:
            scheduler_cls = AsyncScheduler
        if sc.async_scheduling and not issubclass(scheduler_cls, AsyncScheduler):
            raise ValueError(
                f"async_scheduling=True needs an AsyncScheduler; scheduler_cls={scheduler_cls.__name__} is not one."
            )
        self.scheduler = scheduler_cls(sc, cc, speculative_config=config.speculative_config)
        self.clock = clock if clock is not None else model_runner.clock
        # The queue calls the runner through the engine, so a runner swapped in later (a test's wrapper) is used.
        self.batch_queue = BatchQueue(self._execute_model, self.clock) if sc.async_scheduling else None
        self.trace = EngineTrace(block_size=cc.block_size)
        self.record_block_pool = record_block_pool
        self.output_processor = OutputProcessor(self.tokenizer)
        self.grammar_compiler: GrammarCompiler | None = None  # made on the first guided request

    # ------------------------------------------------------------------ requests
    def add_request(
        self,
        request_id: str,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        arrival_time: float | None = None,
        priority: int = 0,
        grammar: Any | None = None,
        cache_salt: str | None = None,
    ) -> None:
        """Validate and queue one request; a bad one raises ValueError and changes nothing.

        ``cache_salt`` (vLLM 0.9+): requests share prefix-cache blocks only with requests of the same salt
        (None: with unsalted ones); a non-empty string."""
        params = params or SamplingParams()
        if cache_salt is not None and (not isinstance(cache_salt, str) or not cache_salt):
            raise ValueError(f"cache_salt must be a non-empty string (or None), got {cache_salt!r}.")
        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be a SamplingParams, got {type(params).__name__}.")
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("This engine has no tokenizer: pass the prompt as a list of token ids.")
            text, token_ids = prompt, self.tokenizer.encode(prompt)
        else:
            text, token_ids = None, list(prompt)
            bad = [
                t
                for t in token_ids
                if not isinstance(t, int) or t < 0 or (self.vocab_size is not None and t >= self.vocab_size)
            ]
            if bad:
                limit = f"0..{self.vocab_size - 1}" if self.vocab_size else ">= 0"
                raise ValueError(f"request {request_id!r}: token id {bad[0]!r} is out of range; allowed {limit}.")
        if self.vocab_size is not None:  # SamplingParams checked they are ints >= 0; the vocabulary is the engine's
            bad = [t for t in params.stop_token_ids if t >= self.vocab_size]
            if bad:
                raise ValueError(
                    f"stop_token_ids of request {request_id!r}: token id {bad[0]!r} is out of range; "
                    f"allowed 0..{self.vocab_size - 1}."
                )
        max_logprobs = self.config.model_config.max_logprobs
        for name in ("logprobs", "prompt_logprobs"):  # vLLM's Processor._validate_logprobs
            if (k := getattr(params, name)) is not None and k > max_logprobs:
                raise ValueError(
                    f"{name} must be in [0, {max_logprobs}] (max_logprobs={max_logprobs}, the engine's limit), got {k}."
                )
        if params.stop and self.tokenizer is None:
            raise ValueError("stop strings need a tokenizer; this engine has none: use stop_token_ids.")
        if self.batch_queue is not None and (params.guided_choice is not None or grammar is not None):
            raise ValueError(
                f"request {request_id!r}: guided_choice (structured output) is not supported with "
                "async_scheduling=True (step N+1's grammar mask would need step N's token); start the engine "
                "without async_scheduling to use it."
            )
        if params.guided_choice is not None and grammar is None:
            grammar = self._grammar_compiler().submit(params.guided_choice)  # compiled in the background
        arrival = self.clock.now() if arrival_time is None else arrival_time
        request = Request(
            request_id,
            token_ids,
            params,
            eos_token_id=self.eos_token_id,
            arrival_time=arrival,
            priority=priority,
            grammar=grammar,
            cache_salt=cache_salt,
        )
        self.scheduler.add_request(request)  # raises on empty / too long / duplicate, untouched
        self.trace.on_arrival(request_id, arrival, len(token_ids))
        self.output_processor.add_request(request_id, text, token_ids, params, arrival)

    def _grammar_compiler(self) -> GrammarCompiler:
        if self.tokenizer is None:
            raise ValueError("guided_choice needs a tokenizer; this engine has none.")
        if self.grammar_compiler is None:
            from minivllm.structured_output import GrammarCompiler

            self.grammar_compiler = GrammarCompiler(self.tokenizer, self.eos_token_id)
        return self.grammar_compiler

    def abort_request(self, request_ids: str | list[str]) -> None:
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        now = self.clock.now()
        for req_id in ids:
            if req_id in self.scheduler.requests:
                self.scheduler.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
                self.output_processor.finish(req_id, "abort", None, now)
                self.trace.on_abort(req_id, now)

    def set_scheduling(self, **changes: Any) -> SchedulerConfig:
        """Change scheduler settings between steps (vLLM names: max_num_batched_tokens,
        enable_chunked_prefill, long_prefill_token_threshold, max_num_seqs). Validated as a new
        SchedulerConfig; a bad value raises ValueError and changes nothing."""
        current = dataclasses.asdict(self.scheduler.scheduler_config)
        unknown = set(changes) - set(current)
        if unknown:
            raise ValueError(f"Unknown scheduler setting(s) {sorted(unknown)}; allowed: {sorted(current)}.")
        new = SchedulerConfig(**{**current, **changes})
        self.scheduler.reconfigure(new)
        self.config.scheduler_config = new
        return new

    def has_unfinished_requests(self) -> bool:
        """Requests waiting or running, or (async scheduling) a step still in flight."""
        return self.scheduler.has_unfinished_requests() or bool(self.batch_queue)

    def get_num_unfinished_requests(self) -> int:
        return self.scheduler.get_num_unfinished_requests()

    # ------------------------------------------------------------------ one step
    def step(self) -> list[RequestOutput]:
        """One engine iteration: schedule -> execute -> update -> record. Returns the outputs of the requests
        that got tokens or finished. With async scheduling, the outputs of the oldest step in flight."""
        if self.batch_queue is not None:
            return self._step_async(self.batch_queue)
        scheduler_output = self.scheduler.schedule()
        start = self.clock.now()
        try:
            runner_output = self.model_runner.execute_model(scheduler_output)
        except Exception as e:  # one request's failure stays its own: see minivllm.core.rollback
            return self._roll_back(scheduler_output, e)
        return self._update(scheduler_output, runner_output, start, self.clock.now())

    def _execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        return self.model_runner.execute_model(scheduler_output)

    def _step_async(self, queue: BatchQueue) -> list[RequestOutput]:
        """vLLM's ``step_with_batch_queue``: schedule while the queue has room (the first call fills it with
        two steps), then wait for the oldest step and apply its outputs. Step N+1 is scheduled while step N
        runs, so it sees the outputs up to step N-1 only."""
        while True:
            scheduled = False
            if not queue.full():
                scheduler_output = self.scheduler.schedule()
                scheduled = scheduler_output.total_num_scheduled_tokens > 0
                # An empty step still runs when nothing else would, or to tell the runner who finished.
                if scheduled or not queue or scheduler_output.finished_req_ids or scheduler_output.preempted_req_ids:
                    queue.submit(scheduler_output)
            if not scheduled or queue.full():
                break
        scheduler_output, future = queue.pop()
        try:
            result = future.result()
        except Exception as e:  # the steps behind it never ran: undo them all, blame this one
            return self._roll_back(scheduler_output, e, queue.drain_after_failure())
        except BaseException:  # Ctrl-C while waiting: the step still runs, apply it next time
            if not future.done():
                queue.push_front(scheduler_output, future)
            else:  # the runner itself raised it: undo the steps in flight, blame nobody, and let it through
                skipped = queue.drain_after_failure()
                assert isinstance(self.scheduler, AsyncScheduler)
                requeued = self.scheduler.roll_back_steps([scheduler_output, *skipped], [], "interrupted")
                self.model_runner.roll_back({r: self.scheduler.requests[r].num_tokens for r in requeued})
            raise
        return self._update(scheduler_output, result.runner_output, result.start, result.end)

    def _update(
        self, scheduler_output: SchedulerOutput, runner_output: ModelRunnerOutput, start: float, end: float
    ) -> list[RequestOutput]:
        """Apply one executed step: scheduler, then outputs (text, stop strings), then the trace."""
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, runner_output)
        processed = self.output_processor.process_outputs(engine_core_outputs.outputs, scheduler_output, start, end)
        self.scheduler.finish_requests(processed.reqs_to_abort, RequestStatus.FINISHED_STOPPED)  # stop strings
        blocks = self._block_snapshot() if self.record_block_pool else None
        self.trace.record_step(scheduler_output, engine_core_outputs, start, end, blocks)
        return processed.request_outputs

    def _roll_back(
        self, scheduler_output: SchedulerOutput, error: Exception, skipped: list[SchedulerOutput] | None = None
    ) -> list[RequestOutput]:
        """The runner failed on ``scheduler_output``: abort the requests it is blamed on, recompute the others
        (async scheduling: also those of the ``skipped`` steps queued behind it)."""
        failed = culprits(scheduler_output, error)
        reason = error.message if isinstance(error, RequestError) else f"{type(error).__name__}: {error}"
        logger.warning("step failed (%s); aborting %s, recomputing the rest of the step", reason, failed)
        if isinstance(self.scheduler, AsyncScheduler) and skipped is not None:
            requeued = self.scheduler.roll_back_steps([scheduler_output, *skipped], failed, reason)
        else:
            requeued = self.scheduler.roll_back_step(scheduler_output, failed, reason)
        self.model_runner.roll_back({r: self.scheduler.requests[r].num_tokens for r in requeued})
        now = self.clock.now()
        for req_id in failed:
            self.output_processor.finish(req_id, "abort", reason, now)
            self.trace.on_abort(req_id, now)
        return [self.output_processor.outputs[req_id] for req_id in failed]

    def _block_snapshot(self) -> BlockSnapshot:
        kv = self.scheduler.kv_cache_manager
        return BlockSnapshot(kv.block_pool.snapshot(), {r: kv.get_block_ids(r) for r in kv.req_to_blocks})

    @property
    def outputs(self) -> Mapping[str, RequestOutput]:
        """Every request's output so far, by id (read-only; finished ones stay until
        ``output_processor.pop_output``)."""
        return self.output_processor.outputs
