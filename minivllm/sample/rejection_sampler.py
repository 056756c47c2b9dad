"""Verify draft tokens against the target model in one forward (§11.8.2).

Mirrors ``vllm/v1/sample/rejection_sampler.py`` for drafts that come without a
probability (the n-gram proposer's guesses are point masses). Row ``j`` of a
request's ``1 + k`` logits rows predicts the token after draft ``j - 1``.

- Greedy: accept drafts while each equals the target's argmax; then append the
  argmax at the first mismatch (or the bonus token after the last draft). The
  output is exactly what greedy decoding without drafts would produce.
- Sampling: accept draft ``d`` with probability ``p(d)`` (= min(1, p/q) with
  q(d) = 1); on rejection draw from ``p`` with ``d`` removed, renormalised. The
  tokens are distributed exactly as plain sampling from ``p``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from minivllm.sample.sampler import Sampler, apply_top_k_top_p
from minivllm.sampling_params import SamplingParams


def target_probs(logits: Tensor, params: SamplingParams) -> Tensor:
    """Rows of probabilities after temperature, top-k and top-p (the distribution plain sampling draws from)."""
    logits = logits.float() / params.temperature
    vocab = logits.shape[-1]
    rows = logits.shape[0]
    top_k = torch.full((rows,), params.top_k, device=logits.device) if 0 < params.top_k < vocab else None
    top_p = torch.full((rows,), params.top_p, device=logits.device) if params.top_p < 1.0 else None
    return apply_top_k_top_p(logits, top_k, top_p).softmax(dim=-1)


def verify_drafts(
    logits: Tensor, drafts: Sequence[int], params: SamplingParams, generator: torch.Generator | None
) -> list[int]:
    """``logits``: the request's ``1 + len(drafts)`` rows. Returns accepted drafts + one more token."""
    if params.greedy:
        target = logits.argmax(dim=-1).tolist()
        out = []
        for j, draft in enumerate(drafts):
            if draft != target[j]:
                break
            out.append(draft)
        out.append(target[len(out)])
        return out
    probs = target_probs(logits, params)
    out = []
    for j, draft in enumerate(drafts):
        u = torch.rand((), generator=generator, device=probs.device)
        if u < probs[j, draft]:
            out.append(draft)
            continue
        residual = probs[j].clone()
        residual[draft] = 0.0
        if residual.sum() <= 0:  # p was a point mass on the draft: cannot reject (numerically)
            out.append(draft)
            continue
        out.append(int(Sampler.random_sample((residual / residual.sum()).unsqueeze(0), [generator])[0].item()))
        return out
    bonus = int(Sampler.random_sample(probs[len(drafts)].unsqueeze(0), [generator])[0].item())  # an int64 id
    return out + [bonus]
