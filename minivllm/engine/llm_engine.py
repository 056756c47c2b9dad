"""LLMEngine: add requests, step, collect outputs (§11.3, §11.9).

Mirrors ``vllm/v1/engine/core.py`` (``EngineCore.step``) and the parts of
``vllm/v1/engine/llm_engine.py`` / ``processor.py`` that validate requests, in
one process. One step is: ``schedule()`` (decisions only), ``execute_model()``
(the real model, the fake runner or the simulator), update (``update_from_output()``:
tokens, stops, frees; then the OutputProcessor: text, stop strings, metrics), and
record (one StepRecord in the trace). Replaying a timed workload is the lab's
(``minivllm.lab.sim.run.run_workload``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from minivllm.config import EngineConfig, SchedulerConfig
from minivllm.core.output import SchedulerOutput
from minivllm.core.rollback import RequestError, culprits
from minivllm.core.scheduler import Scheduler
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
        """``scheduler_cls``: the V1 Scheduler, or a comparison baseline built on it (``minivllm.lab.baselines``)."""
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
        self.scheduler = scheduler_cls(sc, cc, speculative_config=config.speculative_config)
        self.clock = clock if clock is not None else model_runner.clock
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
        return self.scheduler.has_unfinished_requests()

    def get_num_unfinished_requests(self) -> int:
        return self.scheduler.get_num_unfinished_requests()

    # ------------------------------------------------------------------ one step
    def step(self) -> list[RequestOutput]:
        """One engine iteration: schedule -> execute -> update -> record. Returns the outputs of the requests
        that got tokens or finished."""
        scheduler_output = self.scheduler.schedule()
        start = self.clock.now()
        try:
            runner_output = self.model_runner.execute_model(scheduler_output)
        except Exception as e:  # one request's failure stays its own: see minivllm.core.rollback
            return self._roll_back(scheduler_output, e)
        end = self.clock.now()
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, runner_output)
        processed = self.output_processor.process_outputs(engine_core_outputs.outputs, scheduler_output, start, end)
        self.scheduler.finish_requests(processed.reqs_to_abort, RequestStatus.FINISHED_STOPPED)  # stop strings
        blocks = self._block_snapshot() if self.record_block_pool else None
        self.trace.record_step(scheduler_output, engine_core_outputs, start, end, blocks)
        return processed.request_outputs

    def _roll_back(self, scheduler_output: SchedulerOutput, error: Exception) -> list[RequestOutput]:
        """The runner failed on ``scheduler_output``: abort the requests it is blamed on, recompute the others."""
        failed = culprits(scheduler_output, error)
        reason = error.message if isinstance(error, RequestError) else f"{type(error).__name__}: {error}"
        logger.warning("step failed (%s); aborting %s, recomputing the rest of the step", reason, failed)
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
