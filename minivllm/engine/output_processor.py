"""OutputProcessor: the engine core's per-step outputs become what a caller sees (§11.9).

Mirrors ``vllm/v1/engine/output_processor.py`` (``OutputProcessor.process_outputs``, its ``RequestState``
and ``OutputProcessorOutput``): it holds every request's :class:`RequestOutput`, appends the step's new
tokens and their logprobs (``minivllm.engine.logprobs``), detokenizes, checks stop strings
(``minivllm.engine.stop_strings``), fills the request's metrics and marks finishes. It never touches the
Scheduler: a request a stop string ended is returned in ``reqs_to_abort`` and the engine finishes it through
``Scheduler.finish_requests``, as vLLM's engine does.

Deviations: vLLM's metrics live in ``IterationStats``; here the times are the step's, on the engine's clock.
Requests with stop strings are decoded incrementally after every step (as vLLM's detokenizer does); the
others once, when they finish.
A stop string also marks the :class:`EngineCoreOutput` it ends (finish_reason "stop", the string), so that
the trace the engine records next sees the request finish in this step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from minivllm.engine.detokenizer import IncrementalDetokenizer
from minivllm.engine.logprobs import LogprobsProcessor, logprob_dicts
from minivllm.engine.stop_strings import StopStringChecker, checker_for
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams

if TYPE_CHECKING:
    from collections.abc import Mapping

    from minivllm.core.output import EngineCoreOutput, SchedulerOutput
    from minivllm.worker.base import Tokenizer


@dataclass
class RequestState:
    """One request's output so far and what is needed to finish it (vLLM: ``RequestState``)."""

    output: RequestOutput
    stop_checker: StopStringChecker | None = None  # only for requests with stop strings
    include_stop_str_in_output: bool = False  # a stop token's text stays in the text too (vLLM's flag)
    detokenizer: IncrementalDetokenizer | None = None  # requests with stop strings: their text, step by step
    first_scheduled_time: float | None = None  # start of the step that first admitted it
    num_cached_tokens: int = 0  # prefix-cache hit tokens at that admission
    first_token_time: float | None = None
    last_token_time: float | None = None
    logprobs_processor: LogprobsProcessor | None = None  # only for requests with SamplingParams.logprobs
    num_prompt_logprobs: int | None = None  # SamplingParams.prompt_logprobs


@dataclass
class OutputProcessorOutput:
    """What one step produced: the outputs that changed, and the requests the engine must finish."""

    request_outputs: list[RequestOutput] = field(default_factory=list)
    reqs_to_abort: list[str] = field(default_factory=list)


def stopped_by_token(finished: bool, finish_reason: str | None, stop_reason: object, include_in_output: bool) -> bool:
    """True when the request's last token stopped it (EOS or a stop token id: finish_reason "stop" with an int or
    no stop_reason) and its text must be left out (vLLM's ``IncrementalDetokenizer.update``, ``stop_terminated``)."""
    return finished and finish_reason == "stop" and not isinstance(stop_reason, str) and not include_in_output


class OutputProcessor:
    """Every request's :class:`RequestOutput`, by id, until a caller pops it."""

    def __init__(self, tokenizer: Tokenizer | None) -> None:
        self.tokenizer = tokenizer
        self.request_states: dict[str, RequestState] = {}  # kept after a finish until ``pop_output``
        self._outputs: dict[str, RequestOutput] = {}  # the same outputs, for the read-only ``outputs``

    def add_request(
        self, request_id: str, prompt: str | None, prompt_token_ids: list[int], params: SamplingParams, arrival: float
    ) -> None:
        output = RequestOutput.new(request_id, prompt, list(prompt_token_ids), arrival)
        state = RequestState(output, checker_for(params), params.include_stop_str_in_output)
        if state.stop_checker is not None:
            state.detokenizer = IncrementalDetokenizer(self.tokenizer)
        state.num_prompt_logprobs = params.prompt_logprobs
        if params.prompt_logprobs is not None:
            output.prompt_logprobs = [None]  # nothing predicts the first prompt token; the rest come with the first
        if params.logprobs is not None:
            state.logprobs_processor = LogprobsProcessor.new(self.tokenizer, params.logprobs)
            output.outputs[0].logprobs = state.logprobs_processor.logprobs  # the same list, filled step by step
            output.outputs[0].cumulative_logprob = 0.0
        self.request_states[request_id] = state
        self._outputs[request_id] = output

    @property
    def outputs(self) -> Mapping[str, RequestOutput]:
        """Every request's output so far, by id (read-only; finished ones stay until ``pop_output``)."""
        return MappingProxyType(self._outputs)

    def pop_output(self, request_id: str) -> RequestOutput | None:
        """Hand a request's output over and forget it (the engine keeps no output a caller has taken)."""
        self.request_states.pop(request_id, None)
        return self._outputs.pop(request_id, None)

    def process_outputs(
        self, engine_core_outputs: list[EngineCoreOutput], scheduler_output: SchedulerOutput, start: float, end: float
    ) -> OutputProcessorOutput:
        """One step (scheduled at ``start``, its tokens out at ``end``): new tokens, stop strings, metrics,
        finishes. Returns the outputs of the requests that got tokens or finished."""
        for new in scheduler_output.scheduled_new_reqs:
            if (state := self.request_states.get(new.req_id)) is not None:
                state.first_scheduled_time, state.num_cached_tokens = start, new.num_computed_tokens
        result = OutputProcessorOutput()
        for o in engine_core_outputs:
            state = self.request_states[o.request_id]
            ro = state.output
            ro.outputs[0].token_ids.extend(o.new_token_ids)
            if o.new_prompt_logprobs is not None and state.num_prompt_logprobs is not None:
                lists, k = o.new_prompt_logprobs, state.num_prompt_logprobs
                ro.prompt_logprobs = [None, *logprob_dicts(lists, self.tokenizer, k)]
            if state.logprobs_processor is not None and o.new_logprobs is not None:
                state.logprobs_processor.update(o.new_logprobs)
                ro.outputs[0].cumulative_logprob = state.logprobs_processor.cumulative_logprob
            if o.new_token_ids:
                state.last_token_time = end
                if state.first_token_time is None:
                    state.first_token_time = end
            # vLLM's detokenizer leaves out the text of the token that stopped the request (EOS or a stop
            # token id) unless include_stop_str_in_output; the token stays in token_ids.
            drop = stopped_by_token(o.finished, o.finish_reason, o.stop_reason, state.include_stop_str_in_output)
            decoded = state.stop_checker is not None and self._check_stop_strings(state, o, result, drop)
            self._update_metrics(state)
            if o.finished:
                self.finish(o.request_id, o.finish_reason, o.stop_reason, end)
                if not decoded:
                    self.detokenize(ro, drop)
            result.request_outputs.append(ro)
        return result

    def _check_stop_strings(
        self, state: RequestState, o: EngineCoreOutput, result: OutputProcessorOutput, drop_last: bool
    ) -> bool:
        """Decode the request's text (the text so far, as vLLM's cumulative output has it: the server streams
        it); if it now holds a stop string, cut the text there and end the request ("stop", the string)."""
        assert state.stop_checker is not None
        ro = state.output
        assert state.detokenizer is not None  # made with the checker
        new = o.new_token_ids[:-1] if drop_last else o.new_token_ids
        state.detokenizer.update(list(new), finished=o.finished)  # decodes a few tokens, not the whole text
        ro.outputs[0].text = state.detokenizer.text  # whole characters only until it finishes
        hit = state.stop_checker.check(ro.outputs[0].text, finished=o.finished)
        if hit is not None:
            ro.outputs[0].text, stop = hit
            if not o.finished:
                result.reqs_to_abort.append(o.request_id)
            o.finish_reason, o.stop_reason = "stop", stop
        return True

    @staticmethod
    def _update_metrics(state: RequestState) -> None:
        """The request's times (and prefix-cache hit) so far, into its output's metrics."""
        ro, m = state.output, state.output.metrics
        if m is None:
            return
        m.first_scheduled_time, m.first_token_time = state.first_scheduled_time, state.first_token_time
        if state.first_scheduled_time is not None:
            m.time_in_queue = state.first_scheduled_time - m.arrival_time
            ro.num_cached_tokens = state.num_cached_tokens
        if state.last_token_time is not None:
            m.last_token_time = state.last_token_time

    def finish(self, request_id: str, finish_reason: str | None, stop_reason: int | str | None, now: float) -> None:
        """Mark a request's output finished (a stop, a length, an abort) at ``now``."""
        state = self.request_states[request_id]
        state.stop_checker = None
        ro = state.output
        completion = ro.outputs[0]
        ro.finished, completion.finish_reason, completion.stop_reason = True, finish_reason, stop_reason
        if ro.metrics is not None:
            ro.metrics.finished_time = now

    def detokenize(self, output: RequestOutput, drop_last: bool = False) -> str:
        """Set and return ``output.outputs[0].text`` (empty without a tokenizer); done for every finished
        request without stop strings (those are decoded incrementally: ``_check_stop_strings``).
        ``drop_last``: leave the last token (the stop token) out of the text."""
        if self.tokenizer is None:
            return ""
        completion = output.outputs[0]
        ids = completion.token_ids[:-1] if drop_last else completion.token_ids
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence decodes to one string
        completion.text = text
        return text
