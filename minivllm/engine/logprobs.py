"""LogprobsProcessor: one request's log-probabilities, step by step, as a caller sees them (§11.9).

Mirrors ``vllm/v1/engine/logprobs.py`` (0.8.5): each step's row from the runner (the sampled token, then the
top ``logprobs``, and the sampled token's rank) becomes a dict ``token id -> Logprob`` appended to
``CompletionOutput.logprobs``, and the sampled token's log-probability is added to ``cumulative_logprob``. A
token in the top k appears once, with its top-k rank (the dict keeps the first rank it got, the sampled
token's, and then the top-k one replaces it: the same rank when it is right, as vLLM's dict does). Token
strings are the tokenizer's tokens (``convert_ids_to_tokens``, e.g. ``"Ġworld"``), as vLLM 0.8.5's
``convert_ids_list_to_tokens``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minivllm.sequence import Logprob, SampleLogprobs

if TYPE_CHECKING:
    from minivllm.core.output import LogprobsLists
    from minivllm.worker.base import Tokenizer


@dataclass
class LogprobsProcessor:
    """The logprobs of one request that asked for them (``num_logprobs``: its ``SamplingParams.logprobs``)."""

    tokenizer: Tokenizer | None
    num_logprobs: int
    logprobs: SampleLogprobs
    cumulative_logprob: float = 0.0

    @classmethod
    def new(cls, tokenizer: Tokenizer | None, num_logprobs: int) -> LogprobsProcessor:
        return cls(tokenizer, num_logprobs, [])

    def update(self, lists: LogprobsLists) -> None:
        """Append one position per row of ``lists`` (vLLM's ``_update_sample_logprobs``)."""
        for position in logprob_dicts(lists, self.tokenizer, self.num_logprobs):
            self.cumulative_logprob += next(iter(position.values())).logprob  # the sampled token comes first
            self.logprobs.append(position)


def logprob_dicts(lists: LogprobsLists, tokenizer: Tokenizer | None, num_logprobs: int) -> list[dict[int, Logprob]]:
    """One ``{token id: Logprob}`` per row of ``lists`` (also the prompt's: vLLM's ``_update_prompt_logprobs``)."""
    out = []
    for token_ids, logprobs, rank in zip(lists.logprob_token_ids, lists.logprobs, lists.sampled_token_ranks):
        decoded: Iterable[str | None] = itertools.repeat(None)
        if tokenizer is not None:
            tokens = tokenizer.convert_ids_to_tokens(token_ids)
            decoded = [t or "" for t in tokens]  # a list in, a list out; "" for an unknown id, as vLLM
        out.append(make_logprob_dict(logprobs, token_ids, decoded, rank, num_logprobs))
    return out


def make_logprob_dict(
    logprobs: list[float], token_ids: list[int], decoded: Iterable[str | None], rank: int, num_logprobs: int
) -> dict[int, Logprob]:
    """{token id: Logprob}: the sampled token with ``rank``, then the top ``num_logprobs`` with ranks 1..k
    (vLLM's ``_make_logprob_dict``: a sampled token among the top k is written twice, the second time wins)."""
    ranks = itertools.chain((rank,), range(1, num_logprobs + 1))
    return {t: Logprob(lp, r, d) for t, lp, r, d in zip(token_ids, logprobs, ranks, decoded)}
