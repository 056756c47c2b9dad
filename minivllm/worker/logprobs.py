"""The runner's log-probabilities (§11.6): of the sampled tokens, and of every prompt token, chunk by chunk.

``sampled_logprobs``: the step's ``LogprobsLists`` from the raw log-softmax rows of the requests that asked
(``SamplingParams.logprobs``; vLLM's ``Sampler.gather_logprobs`` with the batch's largest k, each row cut to
its own k).

Prompt logprobs mirror ``GPUModelRunner._get_prompt_logprobs_dict`` (vLLM V1 0.8.5). A request with
``SamplingParams(prompt_logprobs=k)`` needs logits at prompt positions ``0 .. P-2`` (position ``j`` predicts
prompt token ``j + 1``), not only at the last scheduled token. Chunked prefill spreads them over steps: each
chunk's positions are computed with the chunk (``plan``), written into the request's table (``record``), and
the whole table goes out once, in the step whose chunk finishes the prompt (the step that samples the first
token). Recomputing the prompt after a preemption writes the same rows again; a table already sent is not
sent twice. The scheduler gives such a request no prefix-cache hit (``KVCacheManager.get_computed_blocks``, as
vLLM), so every prompt position is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minivllm.core.output import LogprobsLists
from minivllm.sample.sampler import Sampler


def sampled_logprobs(
    raw_logprobs: torch.Tensor, ks: list[int], rows: list[int], num_reqs: int, sampled: list[list[int]]
) -> LogprobsLists:
    """Row ``j`` of ``raw_logprobs`` belongs to request ``rows[j]``, which asked for ``ks[j]`` logprobs and
    sampled ``sampled[rows[j]][0]``: its token and top k, as the step's LogprobsLists (one row per scheduled
    request, empty for the others)."""
    tokens = torch.tensor([sampled[i][0] for i in rows], device=raw_logprobs.device)
    ids, values, ranks = Sampler.gather_logprobs(raw_logprobs, max(ks), tokens)
    out = LogprobsLists([[] for _ in range(num_reqs)], [[] for _ in range(num_reqs)], [0] * num_reqs)
    for i, k, row_ids, row_values, rank in zip(rows, ks, ids.tolist(), values.tolist(), ranks.tolist()):
        out.logprob_token_ids[i], out.logprobs[i] = row_ids[: 1 + k], row_values[: 1 + k]
        out.sampled_token_ranks[i] = rank
    return out


@dataclass
class PromptLogprobsTable:
    """One request's rows so far: per prompt position ``j`` < P - 1, (ids, logprobs, rank) of token ``j + 1``."""

    num_logprobs: int
    num_prompt_tokens: int
    rows: list[tuple[list[int], list[float], int] | None] = field(default_factory=list)
    sent: bool = False

    def __post_init__(self) -> None:
        self.rows = [None] * max(self.num_prompt_tokens - 1, 0)

    def lists(self) -> LogprobsLists:
        assert all(r is not None for r in self.rows), "a prompt row was never computed"
        rows = [r for r in self.rows if r is not None]
        return LogprobsLists([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


@dataclass
class PromptChunk:
    """This step's part of one request's table: ``num_logits`` rows from flat-batch row ``first_row``, for prompt
    positions ``start ..``; ``final``: the chunk finishes the prompt, so the table is sent after it."""

    req_id: str
    table: PromptLogprobsTable
    first_row: int
    start: int
    num_logits: int
    final: bool


def plan(
    req_ids: list[str], tables: list[PromptLogprobsTable | None], num_computed: list[int], num_scheduled: list[int]
) -> list[PromptChunk]:
    """The step's chunks of requests with an unsent table (``tables[i]`` None: the request asked for none)."""
    chunks = []
    row = 0
    for req_id, table, start, n in zip(req_ids, tables, num_computed, num_scheduled):
        if table is not None and not table.sent:
            remaining = table.num_prompt_tokens - (start + 1)  # positions left that predict a prompt token
            final = n > remaining  # the chunk reaches the last prompt token: the request samples now
            chunks.append(PromptChunk(req_id, table, row, start, max(min(n, remaining), 0), final))
        row += n
    return chunks


def rows_of(chunks: list[PromptChunk], device: torch.device) -> torch.Tensor | None:
    """The flat-batch rows whose logits the chunks need (None: none)."""
    rows = [c.first_row + j for c in chunks for j in range(c.num_logits)]
    return torch.tensor(rows, dtype=torch.long, device=device) if rows else None


def record(
    chunks: list[PromptChunk], logits: torch.Tensor, token_ids: dict[str, list[int]]
) -> dict[str, LogprobsLists]:
    """Write each chunk's rows (``logits``: theirs, in ``rows_of`` order) into its table; returns the tables the
    step finishes, by request id (vLLM's ``prompt_logprobs_dict``). ``token_ids``: each request's prompt."""
    done: dict[str, LogprobsLists] = {}
    offset = 0
    for c in chunks:
        if c.num_logits:
            part = Sampler.compute_logprobs(logits[offset : offset + c.num_logits])
            targets = torch.tensor(token_ids[c.req_id][c.start + 1 : c.start + 1 + c.num_logits], device=part.device)
            ids, values, ranks = Sampler.gather_logprobs(part, c.table.num_logprobs, targets)
            for j, row in enumerate(zip(ids.tolist(), values.tolist(), ranks.tolist())):
                c.table.rows[c.start + j] = row
            offset += c.num_logits
        if c.final:
            done[c.req_id] = c.table.lists()
            c.table.sent = True
    return done
