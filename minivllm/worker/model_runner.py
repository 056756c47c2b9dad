"""ModelRunner: turns a SchedulerOutput into sampled tokens with the real model (§11.6).

Mirrors ``vllm/v1/worker/gpu_model_runner.py`` (v0.8.5): it keeps its own
mirror of every request (tokens, block table, generator) updated only from
SchedulerOutput, packs all scheduled tokens into one flat batch, builds the
varlen metadata, runs the model, and samples one token for each request that
has caught up with its prompt. A request still inside its prompt gets nothing
and its generator is not advanced. With async scheduling the mirror also supplies the input token of a
decode scheduled before the scheduler saw it (vLLM's runner keeps the previous step's sampled ids the same way).

The mirror is two things, as in vLLM: a ``CachedRequestState`` per request and the
persistent ``InputBatch`` (``minivllm.worker.input_batch``), whose numpy rows give
the step's input ids and metadata without a Python loop over requests; a step where
every request just samples (no drafts, grammar, min_tokens or logprobs) is sampled in one call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from minivllm.attention.metadata import (
    AttentionMetadata,
    build_attention_metadata,
    build_attention_metadata_from_arrays,
    to_device,
)
from minivllm.attention.selector import get_attn_backend
from minivllm.config import EngineConfig, resolve_auto_dtype
from minivllm.core.output import LogprobsLists, ModelRunnerOutput, SchedulerOutput
from minivllm.core.rollback import RequestError
from minivllm.model.cpu_gemm import resolve_cpu_gemm, set_cpu_gemm
from minivllm.model.loader import LoadedModel, load_model, resolve_dtype
from minivllm.sample.rejection_sampler import verify_drafts
from minivllm.sample.sampler import Sampler, apply_min_tokens, greedy_tokens, make_generator
from minivllm.spec_decode.ngram_proposer import NgramProposer
from minivllm.worker import logprobs as prompt_logprobs
from minivllm.worker.clock import WallClock
from minivllm.worker.cpu_malloc import keep_freed_memory
from minivllm.worker.cuda_graphs import Capture, DecodeGraphs, capture_sizes, cuda_capture, graph_unsupported_reason
from minivllm.worker.device_memory import CudaMemory, DeviceMemory, profile_memory
from minivllm.worker.input_batch import CachedRequestState, InputBatch
from minivllm.worker.logprobs import PromptLogprobsTable, sampled_logprobs

DEFAULT_CPU_KV_CACHE_BYTES = 1 << 30  # 1 GiB
R = TypeVar("R")
logger = logging.getLogger(__name__)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available; use 'cpu' or 'auto'.")
    return torch.device(device)


class ModelRunner:
    """Owns the model, the paged KV cache tensor and the per-request mirror."""

    def __init__(self, config: EngineConfig, loaded: LoadedModel | None = None) -> None:
        self.config = config
        mc = config.model_config
        self.device = resolve_device(mc.device)
        dtype = resolve_auto_dtype(mc.dtype, self.device.type)
        self.dtype = resolve_dtype(dtype)
        self.loaded = loaded or load_model(mc.model, self.dtype, self.device)
        self.model = self.loaded.model
        self.arch = self.loaded.arch
        # What the engine reads (minivllm.worker.base.ModelRunnerBase).
        self.tokenizer = self.loaded.tokenizer
        self.eos_token_id = self.loaded.eos_token_id
        self.vocab_size = self.arch.vocab_size
        self.max_position_embeddings = self.arch.max_position_embeddings
        # CUDA's memory calls; None on CPU. A test may set a stand-in to run the CUDA branches on a CPU: the
        # KV sizing, the allocation check, and the clock's synchronise before each reading.
        self.device_memory: DeviceMemory | None = CudaMemory(self.device) if self.device.type == "cuda" else None
        self.clock = WallClock(self.synchronize)
        self.cpu_gemm = resolve_cpu_gemm(mc.cpu_gemm, self.device, self.dtype)
        set_cpu_gemm(self.model, self.cpu_gemm)
        if self.device.type == "cpu":
            keep_freed_memory()
        self.block_size = config.cache_config.block_size
        self.attn_backend = get_attn_backend(
            mc.attention_backend, self.device, self.dtype, self.block_size, self.arch.head_dim
        )
        self.sampler = Sampler()
        self.default_generator = torch.Generator(device=self.device)
        self.default_generator.manual_seed(mc.seed)
        self.requests: dict[str, CachedRequestState] = {}
        sc = config.scheduler_config
        # The persistent batch (minivllm.worker.input_batch): token rows start at most 2,048 wide and double
        # when a request outgrows them (a 128k max_model_len would otherwise take 1 MB per row up front).
        width = min((sc.max_model_len or 2048) + 1, 2048)
        self.input_batch = InputBatch(sc.max_num_seqs or 16, width, -(-width // self.block_size) + 1)
        self.kv_caches: torch.Tensor | None = None
        # CUDA graphs of the pure-decode steps (enforce_eager=False): captured by initialize_kv_cache. Where they
        # cannot be, the runner stays eager and says why (vLLM falls back to eager on CPU the same way).
        self.decode_graphs: DecodeGraphs | None = None
        self.graph_capture: Capture = cuda_capture  # a test may run the same buffers eagerly on a CPU
        self.eager_reason: str | None = "enforce_eager=True" if mc.enforce_eager else None
        if not mc.enforce_eager:
            self.eager_reason = graph_unsupported_reason(self.device, self.attn_backend.name)
            if self.eager_reason is not None:
                logger.warning("enforce_eager=False, but running eagerly: %s.", self.eager_reason)
        spec = config.speculative_config
        self.proposer = (
            NgramProposer(spec.num_speculative_tokens, spec.prompt_lookup_max, spec.prompt_lookup_min)
            if spec.num_speculative_tokens > 0
            else None
        )

    def synchronize(self) -> None:
        """Wait for the device's queued kernels (CUDA); nothing on a CPU. The clock calls it before each reading."""
        if self.device_memory is not None:
            self.device_memory.synchronize()

    # ------------------------------------------------------------------ KV cache
    @property
    def block_bytes(self) -> int:
        """Bytes of one block across all layers: K and V, block_size tokens, every KV head."""
        a = self.arch
        elem = torch.tensor([], dtype=self.dtype).element_size()
        return 2 * a.num_layers * self.block_size * a.num_kv_heads * a.head_dim * elem

    def determine_num_blocks(self) -> int:
        """How many blocks fit the memory budget (CPU: bytes; CUDA: gpu_memory_utilization after a warm-up)."""
        cc = self.config.cache_config
        if cc.num_gpu_blocks is not None:
            return cc.num_gpu_blocks
        if self.device_memory is None:
            budget = cc.kv_cache_memory_bytes or DEFAULT_CPU_KV_CACHE_BYTES
            how, raise_it = f"kv_cache_memory_bytes={budget}", "raise kv_cache_memory_bytes"
        else:
            prof = profile_memory(self.device_memory, self.profile_run)
            budget = prof.kv_cache_budget(cc.gpu_memory_utilization)
            how = (
                f"gpu_memory_utilization={cc.gpu_memory_utilization} of {prof.total} bytes, minus the profiling "
                f"run's peak {prof.torch_peak} and {prof.non_torch} bytes torch did not allocate"
            )
            raise_it = "raise gpu_memory_utilization, lower max_num_batched_tokens (the activation peak)"
        num_blocks = budget // self.block_bytes
        if num_blocks < 2:
            raise ValueError(
                f"The KV cache budget ({budget} bytes: {how}) holds {max(num_blocks, 0)} blocks of "
                f"{self.block_bytes} bytes; at least 2 are needed: {raise_it}, or lower block_size."
            )
        return int(num_blocks)

    def initialize_kv_cache(self, num_blocks: int) -> None:
        """Allocate the paged KV cache, then capture the decode graphs unless the runner is eager (vLLM captures
        after the KV cache too: ``capture_model`` in ``gpu_model_runner.py``)."""
        self._allocate_kv_cache(num_blocks)
        if self.eager_reason is None:
            self.capture_model()

    def capture_model(self) -> None:
        """Capture one decode graph per batch size in ``capture_sizes(max_num_seqs)`` (minivllm.worker.cuda_graphs)."""
        sc = self.config.scheduler_config
        assert sc.max_num_seqs is not None and sc.max_model_len is not None  # set by __post_init__
        with torch.inference_mode():
            self.decode_graphs = DecodeGraphs.capture(
                self._forward,
                capture_sizes(sc.max_num_seqs),
                # a block table's widest row: max_model_len, plus room for spec-decode lookahead slots
                -(-(sc.max_model_len + self.config.speculative_config.num_speculative_tokens) // self.block_size) + 1,
                self.block_size,
                self.device,
                self.graph_capture,
            )

    def _allocate_kv_cache(self, num_blocks: int) -> None:
        """Allocate the paged KV cache; one that cannot be allocated raises ValueError saying how many bytes
        were asked for and which parameter to lower (vLLM's "not enough KV cache memory" error, at allocation)."""
        a = self.arch
        shape = (a.num_layers, 2, num_blocks, self.block_size, a.num_kv_heads, a.head_dim)
        asked = num_blocks * self.block_bytes
        on_cuda = self.device_memory is not None
        if self.device_memory is not None:
            available = self.device_memory.mem_get_info()[1]
        else:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        problem = f"more than the device's {available} bytes in all" if asked > available else ""
        if not problem:
            try:
                self.kv_caches = torch.zeros(shape, dtype=self.dtype, device=self.device)
                return
            except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError
                problem = f"the allocation failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        budget = "gpu_memory_utilization" if on_cuda else "kv_cache_memory_bytes"
        raise ValueError(
            f"num_gpu_blocks={num_blocks}: the KV cache asks for {asked} bytes ({asked / 2**30:.2f} GiB: "
            f"{num_blocks} blocks of {self.block_bytes} bytes) on {self.device}, {problem}. Lower num_gpu_blocks, "
            f"or leave it unset and lower {budget} (the KV cache is then sized from it)."
        )

    @torch.inference_mode()
    def profile_run(self) -> None:
        """A warm-up forward over a full token budget, on a throw-away cache, to measure peak memory."""
        sc = self.config.scheduler_config
        assert sc.max_num_batched_tokens is not None and sc.max_model_len is not None  # set by __post_init__
        num_tokens = min(sc.max_num_batched_tokens, sc.max_model_len)
        blocks = -(-num_tokens // self.block_size)
        saved, self.kv_caches = self.kv_caches, None
        self._allocate_kv_cache(blocks + 1)
        meta = build_attention_metadata([0], [num_tokens], [list(range(1, blocks + 1))], self.block_size, self.device)
        ids = torch.zeros(num_tokens, dtype=torch.long, device=self.device)
        self._forward(ids, meta)
        self.kv_caches = saved

    # ------------------------------------------------------------------ one step
    def _update_states(self, out: SchedulerOutput) -> None:
        """Apply the step's deltas to the request states and the persistent batch (vLLM's ``_update_states``):
        finished requests leave, new ones get a row, running ones get their new tokens and blocks and the
        scheduler's ``num_computed_tokens``."""
        batch = self.input_batch
        for req_id in out.finished_req_ids:
            self.requests.pop(req_id, None)
            batch.remove_request(req_id)
        for new in out.scheduled_new_reqs:
            state = CachedRequestState(
                new.req_id,
                list(new.prompt_token_ids),
                len(new.prompt_token_ids),
                new.sampling_params,
                _attributed(new.req_id, "", make_generator, new.sampling_params, self.device),
                list(new.block_ids),
                new.num_computed_tokens,
            )
            if (k := new.sampling_params.prompt_logprobs) is not None:
                state.prompt_logprobs = PromptLogprobsTable(k, len(new.prompt_token_ids))
            self.requests[new.req_id] = state
            batch.add_request(state)
        fed_back: list[tuple[int, int, int]] = []  # (row, position, token): a decode's last sampled token
        for cached in out.scheduled_cached_reqs:
            state = self.requests[cached.req_id]
            row = batch.req_id_to_index[cached.req_id]
            c, new_ids = cached.num_computed_tokens, cached.new_token_ids
            state.token_ids[c : c + len(new_ids)] = new_ids
            if len(new_ids) == 1:
                fed_back.append((row, c, new_ids[0]))
            elif new_ids:
                batch.set_token_ids(row, c, new_ids)
            if cached.resumed_from_preemption:
                state.block_ids = list(cached.new_block_ids)
                batch.set_block_ids(row, cached.new_block_ids)
            elif cached.new_block_ids:
                state.block_ids.extend(cached.new_block_ids)
                batch.set_block_ids(row, cached.new_block_ids, append=True)
            state.num_computed_tokens = c
            batch.num_computed_tokens[row] = c
        if fed_back:
            batch.set_last_tokens(*np.array(fed_back, dtype=np.int64).T)
        batch.condense()

    def roll_back(self, num_tokens: dict[str, int]) -> None:
        """Forget what a failed ``execute_model`` did to the mirror: each request's tokens back to the
        scheduler's count (``minivllm.core.rollback``)."""
        for req_id, n in num_tokens.items():
            if (state := self.requests.get(req_id)) is not None:
                del state.token_ids[n:]
                self.input_batch.truncate(req_id, n)
                if state.prompt_logprobs is not None and n <= state.num_prompt_tokens:
                    state.prompt_logprobs.sent = False  # the step that sent them is undone: send them again

    def restore_requests(self, requests: dict[str, CachedRequestState]) -> None:
        """Replace the request states (a step replayed: ``minivllm.lab.sim.calibrate``) and rebuild the
        persistent batch's rows from them."""
        for req_id in list(self.input_batch.req_id_to_index):
            self.input_batch.remove_request(req_id)
        self.input_batch.condense()
        self.requests = requests
        for state in requests.values():
            self.input_batch.add_request(state)

    def _forward(
        self, input_ids: torch.Tensor, meta: AttentionMetadata, extra_rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """fp32 logits of the rows ``meta.logits_indices``, then of ``extra_rows`` (prompt logprobs) if any."""
        self.attn_backend.prepare(meta)
        hidden = self.model(input_ids, meta.positions, self.kv_caches, meta, self.attn_backend)
        rows = meta.logits_indices if extra_rows is None else torch.cat((meta.logits_indices, extra_rows))
        return self.model.compute_logits(hidden[rows]).float()

    @torch.inference_mode()
    def execute_model(self, out: SchedulerOutput) -> ModelRunnerOutput:
        self._update_states(out)
        req_ids = out.req_ids
        if not req_ids:
            return ModelRunnerOutput([], {}, [], [] if self.proposer else None)
        batch = self.input_batch
        rows = batch.rows_of(req_ids)
        states = [self.requests[r] for r in req_ids]
        scheduled = np.fromiter(map(out.num_scheduled_tokens.__getitem__, req_ids), np.int64, count=len(req_ids))
        spec = out.scheduled_spec_decode_tokens
        drafts = [spec.get(r, []) for r in req_ids] if any(spec.values()) else None
        input_ids = self._input_ids(rows, scheduled, states, drafts)
        chunks = None
        if batch.has_prompt_logprobs[rows].any():  # the prompt positions whose logits this step also keeps
            computed = batch.num_computed_tokens[rows].tolist()
            chunks = prompt_logprobs.plan(req_ids, [s.prompt_logprobs for s in states], computed, scheduled.tolist())
        prompt_rows = prompt_logprobs.rows_of(chunks, self.device) if chunks else None
        graphs = self.decode_graphs
        replay = (
            graphs is not None
            and prompt_rows is None
            and len(input_ids) == len(req_ids)
            and graphs.padded_size(len(req_ids)) is not None
        )
        num_blocks = batch.num_blocks[rows]
        meta = build_attention_metadata_from_arrays(
            batch.num_computed_tokens[rows],
            scheduled,
            batch.block_table[rows, : max(1, int(num_blocks.max()))],
            num_blocks,
            self.block_size,
            "cpu" if replay else self.device,  # a replay copies the host rows into the graphs' static buffers
            num_spec_tokens=[len(d) for d in drafts] if drafts else None,
        )
        if graphs is not None and replay:  # a pure-decode step (one token per request) with a graph for its size
            logits = graphs.run(torch.from_numpy(input_ids), meta)
        else:
            ids = to_device(input_ids, self.device)
            logits = self._forward(ids, meta) if prompt_rows is None else self._forward(ids, meta, prompt_rows)
        prompt_logprobs_dict = {}
        if chunks:  # the prompt rows come after the sampling rows
            num_sampling_rows = meta.logits_indices.shape[0]
            prompt = {s.req_id: s.token_ids[: s.num_prompt_tokens] for s in states if s.prompt_logprobs is not None}
            prompt_logprobs_dict = prompt_logprobs.record(chunks, logits[num_sampling_rows:], prompt)
            logits = logits[:num_sampling_rows]
        sampled, logprobs = self._sample(out, states, rows, scheduled, drafts, logits)
        if isinstance(sampled, np.ndarray):  # the common step: one token for every request
            batch.append_sampled(rows, sampled)
            for state, t in zip(states, sampled.tolist()):
                state.token_ids.append(t)
            sampled_lists = sampled.reshape(-1, 1).tolist()  # [[t], ...] built in C (as vLLM's .tolist())
        else:
            sampled_lists = sampled
            for state, row, new_tokens in zip(states, rows.tolist(), sampled):
                if new_tokens:
                    batch.set_token_ids(row, len(state.token_ids), new_tokens)
                    state.token_ids.extend(new_tokens)
        spec_out = None
        if self.proposer is not None:  # next step's drafts, from each request's own context
            spec_out = [  # none for guided requests, nor for requests with logprobs (as vLLM 0.8.5)
                self.proposer.propose(s.token_ids)
                if tokens and r not in out.grammar_allowed_token_ids and s.sampling_params.logprobs is None
                else []
                for s, tokens, r in zip(states, sampled_lists, req_ids)
            ]
        index = {r: i for i, r in enumerate(req_ids)}
        return ModelRunnerOutput(req_ids, index, sampled_lists, spec_out, logprobs, prompt_logprobs_dict)

    def _input_ids(
        self, rows: np.ndarray, scheduled: np.ndarray, states: list[CachedRequestState], drafts: list[list[int]] | None
    ) -> np.ndarray:
        """The step's flat input ids (int64): each request's chunk, then its drafts (riding at its end)."""
        if drafts is None:
            return self.input_batch.input_ids(rows, scheduled)
        ids: list[int] = []
        for state, n, d in zip(states, scheduled.tolist(), drafts):
            c = state.num_computed_tokens
            ids += state.token_ids[c : c + n - len(d)] + d
        return np.array(ids, dtype=np.int64)

    def _sample(
        self,
        out: SchedulerOutput,
        states: list[CachedRequestState],
        rows: np.ndarray,
        scheduled: np.ndarray,
        drafts: list[list[int]] | None,
        logits: torch.Tensor,
    ) -> tuple[list[list[int]] | np.ndarray, LogprobsLists | None]:
        """Tokens per request: none while its prompt is unfinished; drafts verified; grammar masks applied;
        and the log-probabilities of the requests that ask (None when none does: nothing is computed).

        The common step (no drafts, no grammar, no logprobs, every request past its prompt, no ``min_tokens``
        still to reach) is recognised from the persistent batch's arrays, with no Python per request, and
        returns one token per request as an int64 array; an all-greedy batch is one :func:`greedy_tokens`.
        """
        if drafts is None and not out.grammar_allowed_token_ids and self.input_batch.all_plain(rows, scheduled):
            if self.input_batch.greedy[rows].all():
                return greedy_tokens(logits).cpu().numpy(), None
            params = [s.sampling_params for s in states]
            generators = [s.generator or self.default_generator for s in states]
            return self.sampler(logits, params, generators).cpu().numpy(), None
        return self._sample_each(out, states, scheduled.tolist(), drafts or [[] for _ in states], logits)

    def _sample_each(
        self,
        out: SchedulerOutput,
        states: list[CachedRequestState],
        num_scheduled: list[int],
        drafts: list[list[int]],
        logits: torch.Tensor,
    ) -> tuple[list[list[int]], LogprobsLists | None]:
        """The general case, request by request: prompts still running, drafts, grammars, min_tokens, logprobs."""
        sampled: list[list[int]] = [[] for _ in states]
        row_starts = [0]
        for d in drafts:
            row_starts.append(row_starts[-1] + 1 + len(d))
        eos = self.loaded.eos_token_id
        sampling = [
            i
            for i, (state, n, d) in enumerate(zip(states, num_scheduled, drafts))
            if state.num_computed_tokens + n - len(d) >= len(state.token_ids)  # else inside its prompt: no sample
        ]
        for i in sampling:  # grammar masks first: vLLM applies them to the logits before its sampler
            if (allowed := out.grammar_allowed_token_ids.get(states[i].req_id)) is not None:
                rows = logits[row_starts[i] : row_starts[i + 1]]
                _attributed(states[i].req_id, "sampling failed: ", _mask_to, rows, allowed)
        # Log-probabilities come from these logits (before min_tokens, temperature, top-k, top-p), as vLLM V1's.
        # Requests with logprobs never have drafts (no proposal for them, as vLLM 0.8.5): one row each.
        want = [i for i in sampling if states[i].sampling_params.logprobs is not None and not drafts[i]]
        raw_logprobs = None
        if want:
            raw_logprobs = Sampler.compute_logprobs(logits[torch.tensor([row_starts[i] for i in want])])
        plain = []
        for i in sampling:
            state, d = states[i], drafts[i]
            # Drafts or min_tokens not yet reached change this request's rows first; most requests have
            # neither and go straight to the batched sampler.
            if d or state.num_output_tokens < state.sampling_params.min_tokens:
                rows = logits[row_starts[i] : row_starts[i + 1]]
                drafted = _attributed(state.req_id, "sampling failed: ", self._prepare_rows, rows, state, d, eos)
                if drafted is not None:
                    sampled[i] = drafted
                    continue
            plain.append(i)
        if plain:
            if len(plain) == logits.shape[0]:  # one row per request, all sampling: the rows in place, no copy
                rows = logits
            else:
                rows = logits[torch.tensor([row_starts[i] for i in plain], device=logits.device)]
            params = [states[i].sampling_params for i in plain]
            generators = [states[i].generator or self.default_generator for i in plain]
            for i, token in zip(plain, self.sampler(rows, params, generators).tolist()):
                sampled[i] = [token]
        if raw_logprobs is None:
            return sampled, None
        return sampled, sampled_logprobs(
            raw_logprobs, [states[i].sampling_params.logprobs or 0 for i in want], want, len(states), sampled
        )

    def _prepare_rows(
        self, rows: torch.Tensor, state: CachedRequestState, drafts: list[int], eos: int | None
    ) -> list[int] | None:
        """One request's logits rows in place: min_tokens; its verified drafts, if it has some."""
        params = state.sampling_params
        outputs = [state.num_output_tokens + j for j in range(rows.shape[0])]
        apply_min_tokens(rows, outputs, [params] * rows.shape[0], eos)
        if drafts:
            return verify_drafts(rows, drafts, params, state.generator or self.default_generator)
        return None


def _mask_to(rows: torch.Tensor, allowed: list[int]) -> None:
    """In place: every token outside ``allowed`` (a guided request's grammar) gets -inf."""
    mask = torch.full_like(rows, float("-inf"))
    mask[:, allowed] = 0.0
    rows += mask


def _attributed(req_id: str, prefix: str, fn: Callable[..., R], *args: object) -> R:
    """``fn(*args)``: this request's own work, so any failure becomes a RequestError naming ``req_id``
    (only it fails; ``minivllm.core.rollback``)."""
    try:
        return fn(*args)
    except Exception as e:
        raise RequestError(req_id, f"{prefix}{type(e).__name__}: {e}") from e
