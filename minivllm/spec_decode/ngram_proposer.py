"""N-gram (prompt lookup) proposer: guess the next tokens by finding the last n tokens earlier
in the request's own context (§11.8.2).

Mirrors ``vllm/v1/spec_decode/ngram_proposer.py``: try the longest n first
(``prompt_lookup_max`` down to ``prompt_lookup_min``); at the first earlier
occurrence of the last n tokens, propose the (up to k) tokens that followed it.
No model runs: a draft costs nothing but a search, and the target model checks
all drafts in one forward, inside the same token budget as everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class NgramProposer:
    num_speculative_tokens: int
    prompt_lookup_max: int
    prompt_lookup_min: int

    def propose(self, token_ids: Sequence[int]) -> list[int]:
        """Up to ``num_speculative_tokens`` drafts for what follows ``token_ids`` (maybe none)."""
        n_tokens = len(token_ids)
        for n in range(min(self.prompt_lookup_max, n_tokens - 1), self.prompt_lookup_min - 1, -1):
            start = find_first(token_ids, token_ids[n_tokens - n :], end=n_tokens - 1)
            if start is not None:
                follow = start + n
                return list(token_ids[follow : follow + self.num_speculative_tokens])
        return []


def find_first(haystack: Sequence[int], needle: Sequence[int], end: int) -> int | None:
    """Index of the first occurrence of ``needle`` that ends before ``end`` (KMP, linear time)."""
    m = len(needle)
    if m == 0 or m > end:
        return None
    fail = [0] * m  # longest proper prefix of needle[:i+1] that is also its suffix
    k = 0
    for i in range(1, m):
        while k and needle[i] != needle[k]:
            k = fail[k - 1]
        if needle[i] == needle[k]:
            k += 1
        fail[i] = k
    k = 0
    for i in range(end):
        while k and haystack[i] != needle[k]:
            k = fail[k - 1]
        if haystack[i] == needle[k]:
            k += 1
            if k == m:
                return i - m + 1
    return None
