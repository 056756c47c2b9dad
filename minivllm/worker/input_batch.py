"""The persistent input batch: every request the runner knows, one row of preallocated arrays each (§11.6).

Mirrors ``vllm/v1/worker/gpu_input_batch.py`` (``CachedRequestState``, ``InputBatch``) and ``block_table.py``:
the runner does not rebuild its inputs from per-request Python lists each step. A request gets a row when it is
first scheduled (``add_request``) and keeps it until it finishes (``remove_request``; ``condense`` then moves the
last rows into the holes, so rows ``[0, num_reqs)`` are the live ones). Each step writes only what
``SchedulerOutput`` says changed (new blocks, tokens the runner had not seen, ``num_computed_tokens``) and the
tokens it sampled; the step's input ids, block table and sampling flags are then numpy gathers over the
scheduled rows, whatever the batch size.

Deviations from vLLM: the flat batch keeps the scheduler's order (§11.6), not the rows' order, so each step
looks its rows up by request id (``rows_of``) and gathers them; a preempted request keeps its row (vLLM drops
unscheduled requests from the batch and re-adds them), so the arrays double when more requests than
``max_num_reqs`` are known; token rows start narrow and double as requests grow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from minivllm.sampling_params import SamplingParams

if TYPE_CHECKING:
    from minivllm.worker.logprobs import PromptLogprobsTable


@dataclass
class CachedRequestState:
    """The runner's own record of one request (``CachedRequestState`` in vLLM)."""

    req_id: str
    token_ids: list[int]  # prompt + outputs as far as the runner knows them
    num_prompt_tokens: int
    sampling_params: SamplingParams
    generator: torch.Generator | None
    block_ids: list[int]
    num_computed_tokens: int = 0  # the scheduler's, as of this step's SchedulerOutput (never advanced here)
    prompt_logprobs: PromptLogprobsTable | None = None  # with SamplingParams.prompt_logprobs

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens


PER_ROW = (
    "num_tokens",
    "num_prompt_tokens",
    "num_computed_tokens",
    "num_blocks",
    "min_tokens",
    "greedy",
    "has_logprobs",
    "has_prompt_logprobs",
)
ROW_ARRAYS = ("token_ids", "block_table", *PER_ROW)


class InputBatch:
    """Token ids, block table and per-request numbers of the runner's requests, one row each."""

    def __init__(self, max_num_reqs: int, max_model_len: int, max_num_blocks_per_req: int) -> None:
        rows = max(1, max_num_reqs)
        self.token_ids = np.zeros((rows, max(1, max_model_len)), dtype=np.int64)
        self.num_tokens = np.zeros(rows, dtype=np.int64)  # prompt + outputs known to the runner
        self.num_prompt_tokens = np.zeros(rows, dtype=np.int64)
        self.num_computed_tokens = np.zeros(rows, dtype=np.int64)  # the scheduler's, as of this step
        self.block_table = np.zeros((rows, max(1, max_num_blocks_per_req)), dtype=np.int32)  # 0 past num_blocks
        self.num_blocks = np.zeros(rows, dtype=np.int64)
        self.min_tokens = np.zeros(rows, dtype=np.int64)
        self.greedy = np.zeros(rows, dtype=bool)
        self.has_logprobs = np.zeros(rows, dtype=bool)  # SamplingParams.logprobs set: sampled by request
        self.has_prompt_logprobs = np.zeros(rows, dtype=bool)
        self.req_ids: list[str | None] = []  # row -> request (None: a hole until condense)
        self.req_id_to_index: dict[str, int] = {}

    @property
    def num_reqs(self) -> int:
        return len(self.req_id_to_index)

    def rows_of(self, req_ids: Sequence[str]) -> np.ndarray:
        """The rows of ``req_ids``, in that order (int64)."""
        return np.fromiter(map(self.req_id_to_index.__getitem__, req_ids), dtype=np.int64, count=len(req_ids))

    def input_ids(self, rows: np.ndarray, num_scheduled: np.ndarray) -> np.ndarray:
        """The flat batch's token ids: row ``rows[i]``'s next ``num_scheduled[i]`` tokens from its
        ``num_computed_tokens`` on, all requests back to back (one numpy gather, as vLLM's ``_prepare_inputs``)."""
        starts = np.cumsum(num_scheduled) - num_scheduled
        cols = np.arange(int(num_scheduled.sum())) + np.repeat(self.num_computed_tokens[rows] - starts, num_scheduled)
        ids: np.ndarray = self.token_ids[np.repeat(rows, num_scheduled), cols]
        return ids

    def all_plain(self, rows: np.ndarray, num_scheduled: np.ndarray) -> bool:
        """Whether every row samples this step with nothing to change in its logits first: it catches up with
        its known tokens (no prompt left), has no ``min_tokens`` still to reach and asks for no logprobs."""
        num_tokens = self.num_tokens[rows]
        sampling = self.num_computed_tokens[rows] + num_scheduled >= num_tokens
        min_tokens_due = num_tokens - self.num_prompt_tokens[rows] < self.min_tokens[rows]
        return bool(sampling.all()) and not min_tokens_due.any() and not self.has_logprobs[rows].any()

    # ------------------------------------------------------------------ rows in and out
    def add_request(self, state: CachedRequestState) -> int:
        """Give ``state`` the first free row (a hole, else the end) and fill it; returns the row."""
        if state.req_id in self.req_id_to_index:
            self.remove_request(state.req_id)
        holes = [i for i, r in enumerate(self.req_ids) if r is None] if self.num_reqs < len(self.req_ids) else []
        row = holes[0] if holes else len(self.req_ids)
        if row == len(self.req_ids):
            self.req_ids.append(None)
        if row >= self.token_ids.shape[0]:
            self._grow_rows(row + 1)
        self.req_ids[row] = state.req_id
        self.req_id_to_index[state.req_id] = row
        self.num_tokens[row] = 0
        self.set_token_ids(row, 0, state.token_ids)
        self.num_prompt_tokens[row] = state.num_prompt_tokens
        self.num_computed_tokens[row] = state.num_computed_tokens
        self.block_table[row] = 0
        self.num_blocks[row] = 0
        self.set_block_ids(row, state.block_ids)
        self.min_tokens[row] = state.sampling_params.min_tokens
        self.greedy[row] = state.sampling_params.greedy
        self.has_logprobs[row] = state.sampling_params.logprobs is not None
        self.has_prompt_logprobs[row] = state.sampling_params.prompt_logprobs is not None
        return row

    def remove_request(self, req_id: str) -> int | None:
        """Free ``req_id``'s row (a hole until :meth:`condense`); returns it, or None for an unknown request."""
        row = self.req_id_to_index.pop(req_id, None)
        if row is not None:
            self.req_ids[row] = None
        return row

    def condense(self) -> None:
        """Move the last live rows into the holes, so rows ``[0, num_reqs)`` are the live ones (vLLM's
        ``condense``)."""
        holes = [i for i, r in enumerate(self.req_ids) if r is None]
        for hole in holes:
            while self.req_ids and self.req_ids[-1] is None:
                self.req_ids.pop()
            last = len(self.req_ids) - 1
            if hole >= last:
                break
            req_id = self.req_ids.pop()
            assert req_id is not None
            self.req_ids[hole] = req_id
            self.req_id_to_index[req_id] = hole
            n, b = int(self.num_tokens[last]), int(self.num_blocks[last])
            self.token_ids[hole, :n] = self.token_ids[last, :n]
            self.block_table[hole] = 0
            self.block_table[hole, :b] = self.block_table[last, :b]
            for name in PER_ROW:
                getattr(self, name)[hole] = getattr(self, name)[last]
        del self.req_ids[self.num_reqs :]

    # ------------------------------------------------------------------ what a step changes
    def set_token_ids(self, row: int, start: int, token_ids: Sequence[int]) -> None:
        """``tokens[start : start + len(token_ids)] = token_ids`` (as the request's Python list is updated)."""
        end = start + len(token_ids)
        self._fit_tokens(end)
        self.token_ids[row, start:end] = token_ids
        self.num_tokens[row] = max(int(self.num_tokens[row]), end)

    def set_last_tokens(self, rows: np.ndarray, positions: np.ndarray, tokens: np.ndarray) -> None:
        """One token per row at ``positions`` (decodes' fed-back tokens, one numpy assignment for all)."""
        if len(rows):
            self._fit_tokens(int(positions.max()) + 1)
            self.token_ids[rows, positions] = tokens
            self.num_tokens[rows] = np.maximum(self.num_tokens[rows], positions + 1)

    def append_sampled(self, rows: np.ndarray, tokens: np.ndarray) -> None:
        """One sampled token appended to each row (the common step: every scheduled request got exactly one)."""
        if len(rows):
            end = self.num_tokens[rows]
            self._fit_tokens(int(end.max()) + 1)
            self.token_ids[rows, end] = tokens
            self.num_tokens[rows] = end + 1

    def truncate(self, req_id: str, num_tokens: int) -> None:
        """Forget tokens past ``num_tokens`` (a failed step rolled back)."""
        if (row := self.req_id_to_index.get(req_id)) is not None:
            self.num_tokens[row] = min(int(self.num_tokens[row]), num_tokens)

    def set_block_ids(self, row: int, block_ids: Sequence[int], append: bool = False) -> None:
        """Replace the row's block table (a new or resumed request) or append to it (a running one)."""
        start = int(self.num_blocks[row]) if append else 0
        end = start + len(block_ids)
        if end > self.block_table.shape[1]:
            self.block_table = _wider(self.block_table, end)
        if not append:
            self.block_table[row, end : self.num_blocks[row]] = 0
        self.block_table[row, start:end] = block_ids
        self.num_blocks[row] = end

    def _fit_tokens(self, width: int) -> None:
        if width > self.token_ids.shape[1]:
            self.token_ids = _wider(self.token_ids, width)

    def _grow_rows(self, rows: int) -> None:
        for name in ROW_ARRAYS:
            old = getattr(self, name)
            new = np.zeros((max(rows, 2 * old.shape[0]), *old.shape[1:]), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)


def _wider(a: np.ndarray, width: int) -> np.ndarray:
    """``a`` with at least ``width`` columns (doubling), zero-filled on the right."""
    new = np.zeros((a.shape[0], max(width, 2 * a.shape[1])), dtype=a.dtype)
    new[:, : a.shape[1]] = a
    return new
