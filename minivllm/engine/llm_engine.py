"""LLMEngine: add requests, step, collect outputs (§11.3, §11.9).

Mirrors ``vllm/v1/engine/core.py`` (``EngineCore.step``) and the parts of
``vllm/v1/engine/llm_engine.py`` / ``processor.py`` that validate requests, in
one process. One step is: ``schedule()`` (decisions only), ``execute_model()``
(the real model, the fake runner or the simulator), ``update_from_output()``
(tokens, stops, frees), and one StepRecord in the trace.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from minivllm.config import EngineConfig, SchedulerConfig
from minivllm.core.output import SchedulerOutput
from minivllm.core.rollback import RequestError, culprits, roll_back_step
from minivllm.core.scheduler import Scheduler
from minivllm.engine.stop_strings import StopStringChecker, checker_for
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
        self._outputs: dict[str, RequestOutput] = {}
        self._stop_checkers: dict[str, StopStringChecker] = {}  # requests with stop strings
        self.grammar_compiler: GrammarCompiler | None = None  # made on the first guided request
        # Tests force failures here: called after execute_model with the SchedulerOutput; what it raises is
        # handled as the runner's own failure (a RequestError names the requests it belongs to).
        self.fault_hook: Callable[[SchedulerOutput], None] | None = None

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
        self._outputs[request_id] = RequestOutput.new(request_id, text, list(token_ids), arrival)
        if (checker := checker_for(params)) is not None:
            self._stop_checkers[request_id] = checker

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
                self._finish(self._outputs[req_id], "abort", None, now)
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
        """One engine iteration; returns the outputs of requests that got tokens (or finished)."""
        out = self.scheduler.schedule()
        start = self.clock.now()
        try:
            result = self.model_runner.execute_model(out)
            if self.fault_hook is not None:
                self.fault_hook(out)
        except Exception as e:  # one request's failure stays its own: see minivllm.core.rollback
            return self._recover(out, e)
        end = self.clock.now()
        core = self.scheduler.update_from_output(out, result)
        decoded = set()  # requests with stop strings: their text was just decoded (and cut, if one stopped)
        for o in core.outputs:
            self._outputs[o.request_id].outputs[0].token_ids.extend(o.new_token_ids)
            if o.request_id in self._stop_checkers:
                self._check_stop_strings(o)
                decoded.add(o.request_id)
        self.trace.record_step(out, core, start, end, self._block_snapshot() if self.record_block_pool else None)
        changed = []
        for o in core.outputs:
            ro = self._outputs[o.request_id]
            self._update_metrics(ro)
            if o.finished:
                self._finish(ro, o.finish_reason, o.stop_reason, end)
                if o.request_id not in decoded:
                    self.detokenize(ro)
            changed.append(ro)
        return changed

    def _check_stop_strings(self, o: Any) -> None:
        """Decode the request's text (the text so far, as vLLM's cumulative output has it: the server streams it);
        if it now holds a stop string, cut the text there and finish the request ("stop", the string), as vLLM's
        output processor has the engine core do."""
        ro = self._outputs[o.request_id]
        hit = self._stop_checkers[o.request_id].check(self.detokenize(ro))
        if hit is None:
            return
        ro.outputs[0].text, stop = hit
        if not o.finished:
            self.scheduler.finish_requests(o.request_id, RequestStatus.FINISHED_STOPPED)
        o.finish_reason, o.stop_reason = "stop", stop

    def _update_metrics(self, ro: RequestOutput) -> None:
        """Copy the trace's times (and prefix-cache hit) for this request into its output's metrics."""
        rec, m = self.trace.requests.get(ro.request_id), ro.metrics
        if rec is None or m is None:
            return
        m.first_scheduled_time, m.first_token_time = rec.first_scheduled_time, rec.first_token_time
        if rec.first_scheduled_time is not None:
            m.time_in_queue = rec.first_scheduled_time - rec.arrival_time
            ro.num_cached_tokens = rec.num_cached_tokens
        if rec.token_times:
            m.last_token_time = rec.token_times[-1]

    def _finish(self, ro: RequestOutput, finish_reason: str | None, stop_reason: int | str | None, now: float) -> None:
        completion = ro.outputs[0]
        ro.finished, completion.finish_reason, completion.stop_reason = True, finish_reason, stop_reason
        self._stop_checkers.pop(ro.request_id, None)
        if ro.metrics is not None:
            ro.metrics.finished_time = now

    def _block_snapshot(self) -> BlockSnapshot:
        kv = self.scheduler.kv_cache_manager
        return BlockSnapshot(kv.block_pool.snapshot(), {r: kv.get_block_ids(r) for r in kv.req_to_blocks})

    # ------------------------------------------------------------------ outputs
    @property
    def outputs(self) -> Mapping[str, RequestOutput]:
        """Every request's output so far, by id (read-only; finished ones stay until ``pop_output``)."""
        return MappingProxyType(self._outputs)

    def pop_output(self, request_id: str) -> RequestOutput | None:
        """Hand a request's output over and forget it (the engine keeps no output a caller has taken)."""
        return self._outputs.pop(request_id, None)

    def _recover(self, out: SchedulerOutput, error: Exception) -> list[RequestOutput]:
        """The runner failed on ``out``: abort the requests it is blamed on, recompute the others."""
        failed = culprits(out, error)
        reason = error.message if isinstance(error, RequestError) else f"{type(error).__name__}: {error}"
        logger.warning("step failed (%s); aborting %s, recomputing the rest of the step", reason, failed)
        requeued = roll_back_step(self.scheduler, out, failed, reason)
        self.model_runner.roll_back({r: self.scheduler.requests[r].num_tokens for r in requeued})
        now = self.clock.now()
        outputs = []
        for req_id in failed:
            ro = self._outputs[req_id]
            self._finish(ro, "abort", reason, now)
            self.trace.on_abort(req_id, now)
            outputs.append(ro)
        return outputs

    def detokenize(self, output: RequestOutput) -> str:
        """Set and return ``output.outputs[0].text`` (empty without a tokenizer); done for every finished
        request, and after every step for a request with stop strings (add_request needs a tokenizer for them)."""
        if self.tokenizer is None:
            return ""
        completion = output.outputs[0]
        text = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence decodes to one string
        completion.text = text
        return text

    # ------------------------------------------------------------------ a whole workload
    def run(
        self,
        requests: Iterable[Any],
        max_steps: int | None = None,
        on_step: Any | None = None,
        intake: Callable[[list[float]], list[float]] | None = None,
    ) -> None:
        """Replay timed requests (objects with request_id, arrival_time, prompt_token_ids,
        sampling_params and optional priority) until all are done. Arrival times are seconds from
        now; an idle engine waits (wall clock) or jumps (virtual clock) to the next arrival.
        ``intake`` (simulator: an API server in front, ``minivllm.lab.sim.intake``) maps the sorted arrival
        times to the later times the engine gets each request; latencies still count from arrival."""
        start = self.clock.now()
        pending = sorted(requests, key=lambda r: r.arrival_time)
        arrivals = [r.arrival_time for r in pending]
        ready = arrivals if intake is None else intake(arrivals)
        i = steps = 0
        while i < len(pending) or self.has_unfinished_requests():
            if not self.has_unfinished_requests():
                self.clock.wait_until(start + ready[i])
            now = self.clock.now()
            while i < len(pending) and start + ready[i] <= now:
                r = pending[i]
                self.add_request(
                    r.request_id,
                    r.prompt_token_ids,
                    r.sampling_params,
                    arrival_time=start + r.arrival_time,
                    priority=getattr(r, "priority", 0),
                )
                i += 1
            self.step()
            steps += 1
            if on_step is not None:
                on_step(self)
            if max_steps is not None and steps >= max_steps:
                break
