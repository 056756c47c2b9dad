"""Log-probability records of sampled tokens: ``vllm.sequence.Logprob`` and its list types.

vLLM keeps these in ``vllm/sequence.py`` (a V0 module whose ``Logprob`` V1 still returns); minivllm keeps
only them. A position's record is a dict ``token id -> Logprob`` holding the sampled token and the top k.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Logprob:
    """One token's log-probability at one position (``vllm.sequence.Logprob``).

    ``rank``: 1 for the most likely token (1-based, as vLLM: the sampled token's rank counts every token whose
    log-probability is at least its own). ``decoded_token``: the tokenizer's token string
    (``convert_ids_to_tokens``, e.g. ``"Ġworld"``), None without a tokenizer."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# Per generated token: {token id -> Logprob}, the sampled token and the top ``logprobs`` (vLLM's SampleLogprobs).
SampleLogprobs = list[dict[int, Logprob]]
# Per prompt token: the same, None for the first (nothing predicts it); vLLM's PromptLogprobs.
PromptLogprobs = list[dict[int, Logprob] | None]
