"""What the scheduler hands the model runner, and what comes back (§11.3, §11.6).

Mirrors ``vllm/v1/core/sched/output.py`` and ``vllm/v1/outputs.py``. The
runner never reaches into scheduler objects: everything it needs to keep its
own mirror of block tables and token ids travels in these records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minivllm.core.kv_cache_utils import PrefixCacheStats
from minivllm.sampling_params import SamplingParams


@dataclass
class NewRequestData:
    """A request scheduled for the first time (never run before)."""

    req_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    block_ids: list[int]  # the whole block table: prefix-hit blocks + new ones
    num_computed_tokens: int  # prefix-hit tokens, before this step's advance


@dataclass
class CachedRequestData:
    """A request the runner has seen before: still running, or resumed after preemption."""

    req_id: str
    resumed_from_preemption: bool
    new_token_ids: list[int]  # tokens the runner may not have yet (resumed: prompt + outputs)
    new_block_ids: list[int]  # running: appended to the table; resumed: replace it
    num_computed_tokens: int  # before this step's advance


@dataclass
class SchedulerOutput:
    """One step's decisions: who runs, with how many tokens, in which blocks."""

    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: list[CachedRequestData]  # resumed first, then running
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    # (vLLM also sends num_common_prefix_blocks, for cascade attention; minivllm has no cascade attention.)
    finished_req_ids: set[str]  # finished since the previous schedule()
    preempted_req_ids: set[str] = field(default_factory=set)  # as vLLM [latest]
    token_budget: int = 0  # max_num_batched_tokens this step (for traces)
    # §11.4.4: for guided requests that sample this step, the token ids their grammar allows
    # (vLLM sends a grammar bitmask; a list is enough for choice grammars).
    grammar_allowed_token_ids: dict[str, list[int]] = field(default_factory=dict)
    # Scheduled requests whose step is a decode: it feeds back their last sampled token (the rest of every
    # request's tokens are prompt or recompute, plus drafts). A minivllm addition, so that traces read the
    # prefill / decode split from the scheduler instead of re-deriving it; the scheduler itself never asks.
    decode_req_ids: set[str] = field(default_factory=set)

    @property
    def req_ids(self) -> list[str]:
        """Scheduled request ids in batch order (new, then resumed/running)."""
        return [r.req_id for r in self.scheduled_new_reqs] + [r.req_id for r in self.scheduled_cached_reqs]

    @property
    def num_computed_tokens(self) -> dict[str, int]:
        """Per scheduled request, its num_computed_tokens before this step (where its chunk starts)."""
        return {r.req_id: r.num_computed_tokens for r in self.scheduled_new_reqs + self.scheduled_cached_reqs}


@dataclass
class LogprobsLists:
    """The log-probabilities of one step's sampled tokens, one row per scheduled request (``req_id_to_index``),
    as ``vllm/v1/outputs.py``'s ``LogprobsLists``. Row ``i``: ``logprob_token_ids[i]`` = the sampled token,
    then the top ``logprobs`` ids; ``logprobs[i]`` their log-probabilities; ``sampled_token_ranks[i]`` the sampled
    token's rank (1-based). A request that asked for none, or sampled nothing this step, has an empty row."""

    logprob_token_ids: list[list[int]]
    logprobs: list[list[float]]
    sampled_token_ranks: list[int]

    def slice(self, start: int, end: int) -> LogprobsLists:
        return LogprobsLists(
            self.logprob_token_ids[start:end], self.logprobs[start:end], self.sampled_token_ranks[start:end]
        )


@dataclass
class ModelRunnerOutput:
    """Per scheduled request: the sampled tokens (empty while its prompt is unfinished).

    With speculative decoding a request may get several tokens (accepted drafts
    plus one bonus token); ``spec_token_ids`` are new drafts for the next step.
    ``logprobs``: None unless a request of the step asked for log-probabilities (``SamplingParams.logprobs``).
    """

    req_ids: list[str]
    req_id_to_index: dict[str, int]
    sampled_token_ids: list[list[int]]
    spec_token_ids: list[list[int]] | None = None
    logprobs: LogprobsLists | None = None
    # Requests whose prompt finished this step with SamplingParams.prompt_logprobs: one row per prompt token
    # after the first (vLLM's ``prompt_logprobs_dict``).
    prompt_logprobs_dict: dict[str, LogprobsLists] = field(default_factory=dict)


@dataclass
class EngineCoreOutput:
    """What update_from_output() reports for one request with new tokens."""

    request_id: str
    new_token_ids: list[int]
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    stop_reason: int | str | None = None
    new_logprobs: LogprobsLists | None = None  # one row per new token, for requests with logprobs
    new_prompt_logprobs: LogprobsLists | None = None  # the whole prompt's, with the first token (prompt_logprobs)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class SpecDecodingStats:
    """One step's speculative-decoding counts, summed over the requests that had drafts verified (§11.8.2).

    Mirrors ``vllm/v1/spec_decode/metrics.py`` (v0.8.5; here because core/ imports nothing outside it).
    ``num_accepted_tokens_per_pos[i]`` counts the drafts whose position ``i`` was accepted: acceptance is a
    prefix, so it never grows with ``i``.
    """

    num_spec_tokens: int
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)

    @classmethod
    def new(cls, num_spec_tokens: int) -> SpecDecodingStats:
        return cls(num_spec_tokens=num_spec_tokens, num_accepted_tokens_per_pos=[0] * num_spec_tokens)

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        """One request's draft of ``num_draft_tokens`` tokens, of which the first ``num_accepted_tokens``
        were accepted."""
        if not 0 <= num_accepted_tokens <= min(num_draft_tokens, self.num_spec_tokens):
            raise ValueError(
                f"num_accepted_tokens must be in [0, {min(num_draft_tokens, self.num_spec_tokens)}] "
                f"(the draft's length, at most num_spec_tokens), got {num_accepted_tokens}."
            )
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        for i in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[i] += 1


@dataclass
class SchedulerStats:
    """The scheduler's state after an update (``vllm/v1/metrics/stats.py``), as the trace records it."""

    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    gpu_cache_usage: float = 0.0  # fraction of KV blocks in use
    # Drafts accepted this step per request that had drafts (§11.8.2; the trace keeps them per request).
    spec_accepted: dict[str, int] = field(default_factory=dict)
    # vLLM's fields: the prefix-cache counters taken since the last step (in blocks, as v0.8.5), and this
    # step's drafts and acceptances summed over requests (None when no draft was verified).
    prefix_cache_stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)
    spec_decoding_stats: SpecDecodingStats | None = None


@dataclass
class EngineCoreOutputs:
    outputs: list[EngineCoreOutput]
    scheduler_stats: SchedulerStats | None = None
