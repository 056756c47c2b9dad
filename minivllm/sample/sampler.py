"""Sampler: logits of the rows that need a token -> one token id per row.

Mirrors ``vllm/v1/sample/sampler.py`` (and ``ops/topk_topp_sampler.py``): greedy rows take the
argmax; the others are divided by their temperature, cut by top-k then top-p, and sampled by the
"exponential race" (``argmax(p / q)`` with ``q ~ Exp(1)``), which equals drawing from ``p``. A request
with a seed draws its noise from its own ``torch.Generator``, so its tokens do not depend on which
other requests share the batch (§11.6: the flat batch mixes requests freely). ``apply_min_tokens``
is vLLM's min-tokens logits processor: EOS and stop ids are banned until enough tokens exist.

Log-probabilities (``SamplingParams.logprobs``): ``compute_logprobs`` / ``gather_logprobs`` are vLLM V1's
(0.8.5). As there, they are taken from the model's raw logits, before min_tokens, temperature, top-k and top-p
(after a guided request's grammar mask, which vLLM applies to the logits before its sampler): the model's own
distribution, not the one sampled from (vLLM V0 used the processed one). Nothing is computed unless a request asks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from minivllm.sampling_params import SamplingParams


def make_generator(params: SamplingParams, device: str | torch.device = "cpu") -> torch.Generator | None:
    """The request's own generator, seeded from ``params.seed``; None when it has no seed."""
    if params.seed is None:
        return None
    gen = torch.Generator(device=device)
    gen.manual_seed(params.seed)
    return gen


def apply_min_tokens(
    logits: Tensor,
    num_output_tokens: Sequence[int],
    params: Sequence[SamplingParams],
    eos_token_id: int | None,
) -> Tensor:
    """In place: rows with fewer than ``min_tokens`` outputs get -inf on EOS (unless ignore_eos) and stop ids."""
    for row, (n, p) in enumerate(zip(num_output_tokens, params)):
        if n >= p.min_tokens:
            continue
        banned = list(p.stop_token_ids)
        if eos_token_id is not None and not p.ignore_eos:
            banned.append(eos_token_id)
        if banned:
            logits[row, banned] = float("-inf")
    return logits


def apply_top_k_top_p(logits: Tensor, top_k: Tensor | None, top_p: Tensor | None) -> Tensor:
    """Mask (to -inf) tokens outside each row's top-k, then outside its top-p nucleus.

    ``top_k`` int64 [N] (``vocab`` = off), ``top_p`` float [N] (1.0 = off). The nucleus keeps the
    smallest set of most likely tokens whose probability reaches ``top_p``, and at least one token.
    """
    if top_k is None and top_p is None:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    vocab = logits.shape[-1]
    drop = torch.zeros_like(sorted_logits, dtype=torch.bool)
    if top_k is not None:
        rank = torch.arange(vocab, device=logits.device).expand_as(sorted_logits)
        drop |= rank >= top_k.unsqueeze(1)
    if top_p is not None:
        probs = sorted_logits.masked_fill(drop, float("-inf")).softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the strictly more likely tokens
        drop |= before >= top_p.unsqueeze(1)
        drop[:, 0] = False
    mask = torch.zeros_like(drop).scatter_(1, order, drop)
    return logits.masked_fill(mask, float("-inf"))


def greedy_tokens(logits: Tensor) -> Tensor:
    """``logits.argmax(dim=-1)``: the same indices (first maximum, NaN counted as largest), faster on a CPU.

    PyTorch's CPU ``argmax`` walks a row one element at a time (about 4 ms for 64 rows of SmolLM2's 49,152
    logits on one core); ``amax`` is vectorised. So each row is cut into chunks of ``C`` logits: the chunk
    maxima pick the first chunk holding the row's maximum (``argmax`` over ~100 values), and ``argmax``
    inside that one chunk gives the index. The first maximum of the first chunk that holds it is the row's
    first maximum, so the result equals ``argmax``'s (NaN: ``amax`` and ``argmax`` both propagate it, and
    the first NaN's chunk is found the same way). On CUDA, or when no chunk size divides the vocabulary,
    it is plain ``argmax``.
    """
    n, vocab = logits.shape
    chunk = next((c for c in (512, 256, 1024, 128, 64) if vocab % c == 0 and vocab > c), 0)  # fastest first
    if logits.device.type != "cpu" or not chunk or not logits.is_contiguous():
        return logits.argmax(dim=-1)
    best = logits.view(n, vocab // chunk, chunk).amax(dim=-1).argmax(dim=-1) * chunk  # first index of its chunk
    inside = logits.gather(1, best[:, None] + torch.arange(chunk, device=logits.device)).argmax(dim=-1)
    return best + inside


class Sampler:
    """Batch sampler over ``[N, V]`` fp32 logits with per-request params and generators."""

    def __call__(
        self, logits: Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator | None]
    ) -> Tensor:
        """Return int64 ``[N]`` token ids: greedy rows argmax, others temperature / top-k / top-p / sample."""
        if len(params) != logits.shape[0] or len(generators) != logits.shape[0]:
            raise ValueError(f"{logits.shape[0]} logits rows but {len(params)} params and {len(generators)} generators")
        logits = logits.float()
        random_rows = [i for i, p in enumerate(params) if not p.greedy]
        if not random_rows:
            return greedy_tokens(logits)
        argmax = (
            greedy_tokens(logits)
            if len(random_rows) < len(params)
            else torch.zeros(len(params), dtype=torch.int64, device=logits.device)
        )
        rows = torch.tensor(random_rows, device=logits.device)
        sub = logits.index_select(0, rows)
        sub_params = [params[i] for i in random_rows]
        sub = self.apply_temperature(sub, sub_params)
        sub = apply_top_k_top_p(sub, *self._top_k_top_p(sub_params, sub.shape[-1], sub.device))
        probs = sub.softmax(dim=-1)
        sampled = self.random_sample(probs, [generators[i] for i in random_rows])
        return argmax.index_copy(0, rows, sampled)

    @staticmethod
    def apply_temperature(logits: Tensor, params: Sequence[SamplingParams]) -> Tensor:
        temps = torch.tensor([p.temperature for p in params], dtype=logits.dtype, device=logits.device)
        return logits / temps.unsqueeze(1)

    @staticmethod
    def _top_k_top_p(
        params: Sequence[SamplingParams], vocab: int, device: torch.device
    ) -> tuple[Tensor | None, Tensor | None]:
        ks = [p.top_k if 0 < p.top_k < vocab else vocab for p in params]
        ps = [p.top_p for p in params]
        top_k = torch.tensor(ks, dtype=torch.int64, device=device) if any(k < vocab for k in ks) else None
        top_p = torch.tensor(ps, dtype=torch.float32, device=device) if any(p < 1.0 for p in ps) else None
        return top_k, top_p

    @staticmethod
    def compute_logprobs(logits: Tensor) -> Tensor:
        """fp32 log-softmax over the vocabulary, row by row (vLLM's ``Sampler.compute_logprobs``)."""
        return logits.log_softmax(dim=-1, dtype=torch.float32)

    @staticmethod
    def gather_logprobs(logprobs: Tensor, num_logprobs: int, token_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(ids [N, 1 + num_logprobs], logprobs [N, 1 + num_logprobs], ranks [N]): column 0 is ``token_ids``
        (the sampled tokens), then the ``num_logprobs`` most likely tokens; a rank counts the tokens at least as
        likely as the sampled one, so the argmax has rank 1 (vLLM's ``Sampler.gather_logprobs``)."""
        top_logprobs, top_ids = torch.topk(logprobs, num_logprobs, dim=-1)
        token_ids = token_ids.long().unsqueeze(-1)
        token_logprobs = logprobs.gather(-1, token_ids)
        ranks = (logprobs >= token_logprobs).sum(-1)
        return torch.cat((token_ids, top_ids), dim=1), torch.cat((token_logprobs, top_logprobs), dim=1), ranks

    @staticmethod
    def random_sample(probs: Tensor, generators: Sequence[torch.Generator | None]) -> Tensor:
        """Exponential race: argmax(probs / q), q ~ Exp(1); seeded rows draw q from their own generator."""
        q = torch.empty_like(probs)
        seeded = [i for i, g in enumerate(generators) if g is not None]
        if len(seeded) < len(generators):
            q.exponential_()
        for i in seeded:
            q[i].exponential_(generator=generators[i])
        q.clamp_(min=torch.finfo(q.dtype).tiny)  # never divide by 0 (0 / 0 = nan would win the argmax)
        return probs.div(q).argmax(dim=-1)
