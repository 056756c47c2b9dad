"""What a caller gets back for one request: vLLM's shapes (``vllm/outputs.py``; ``RequestMetrics`` is in
``vllm/sequence.py``).

A :class:`RequestOutput` per request holds the prompt and ``outputs``, a list of :class:`CompletionOutput`,
one per sampled sequence. minivllm samples one sequence per request (``n=1``), so ``outputs`` always has
exactly one entry, ``outputs[0]``: the generated text, token ids, finish and stop reasons. A script that
reads ``o.outputs[0].text`` runs the same on both.

Deviation from vLLM, on purpose: ``metrics`` times are on the engine's clock (``time.perf_counter`` for a
real run, the virtual clock in the simulator), not ``time.time()``; vLLM V1 (0.8.5) leaves ``metrics``
None for the offline ``LLM``, minivllm fills it from the trace (§11.9's latencies, per request).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minivllm.sequence import PromptLogprobs, SampleLogprobs


@dataclass
class CompletionOutput:
    """One generated sequence (``vllm.outputs.CompletionOutput``). With ``SamplingParams(logprobs=k)``,
    ``logprobs`` holds one ``{token id: Logprob}`` per generated token (the sampled token and the top k, from
    the model's raw logits: ``minivllm.engine.logprobs``) and ``cumulative_logprob`` their sampled tokens'
    sum; both None otherwise, as in vLLM."""

    index: int
    text: str
    token_ids: list[int] = field(default_factory=list)
    cumulative_logprob: float | None = None
    logprobs: SampleLogprobs | None = None
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    stop_reason: int | str | None = None  # the stop token id that ended it (or an abort's reason)

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """When the request arrived, was first scheduled, got its first and last token, finished (engine clock)."""

    arrival_time: float
    last_token_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    time_in_queue: float | None = None  # first_scheduled_time - arrival_time
    finished_time: float | None = None


@dataclass
class RequestOutput:
    """What a caller sees of one request (``vllm.outputs.RequestOutput``; the same field order).
    ``num_cached_tokens``: prompt tokens found in the prefix cache when it was first scheduled."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    # SamplingParams(prompt_logprobs=k): None for the first prompt token, then {token id: Logprob} per prompt
    # token (it and the top k), filled when the prompt is done (with the first output token); None otherwise.
    prompt_logprobs: PromptLogprobs | None
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics | None = None
    num_cached_tokens: int | None = None

    @classmethod
    def new(cls, request_id: str, prompt: str | None, prompt_token_ids: list[int], arrival: float) -> RequestOutput:
        """A queued request's output: one empty completion, not finished."""
        return cls(request_id, prompt, prompt_token_ids, None, [CompletionOutput(0, "")], False,
                   RequestMetrics(arrival, arrival))  # fmt: skip
