"""One whole LLMEngine run over a list of prompts, greedy, for the HF-equality tests (§11.3-§11.6).

Shared by tests/engine/test_hf_equality.py (torch backend), the Triton-interpreter end-to-end run
(tests/helpers/triton_interp_e2e.py) and the flash_attn stand-in test: the same loop, the same leak check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minivllm.attention.backend import AttentionBackend
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.metrics.trace import EngineTrace
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner


def run_engine(
    loaded: Any,
    prompts: list[list[int]],
    new_tokens: int,
    *,
    block_size: int = 16,
    num_gpu_blocks: int = 400,
    stagger: bool = False,
    arrivals: list[int] | None = None,
    attn_backend: AttentionBackend | None = None,
    **engine_kwargs: Any,
) -> tuple[list[list[int]], EngineTrace]:
    """Greedy tokens of every prompt (in order) and the engine's trace.

    ``arrivals``: request ``i`` is added just before step ``arrivals[i]`` (non-decreasing), so prompts land
    among decodes; ``stagger=True`` is ``arrivals = [0, 3, 6, ...]``. Default: all at step 0.
    ``attn_backend``: replaces the runner's backend after construction (``engine.model_runner.attn_backend``),
    for a backend the selector refuses here (flash_attn on CPU/fp32). ``engine_kwargs``: vLLM engine-arg
    names (``max_num_batched_tokens``, ``attention_backend``, ...).
    """
    engine_kwargs.setdefault("max_num_seqs", 8)
    engine_kwargs.setdefault("max_model_len", min(1024, loaded.arch.max_position_embeddings))
    config = EngineConfig.from_kwargs(
        model=loaded.hf_folder,
        dtype="float32",
        device="cpu",
        block_size=block_size,
        num_gpu_blocks=num_gpu_blocks,
        **engine_kwargs,
    )
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    if attn_backend is not None:
        assert isinstance(engine.model_runner, ModelRunner)
        engine.model_runner.attn_backend = attn_backend
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    if arrivals is None:
        arrivals = [3 * i if stagger else 0 for i in range(len(prompts))]
    assert len(arrivals) == len(prompts) and arrivals == sorted(arrivals)
    pending = list(enumerate(prompts))
    while pending or engine.has_unfinished_requests():
        while pending and len(engine.trace.steps) >= arrivals[pending[0][0]]:
            i, p = pending.pop(0)
            engine.add_request(str(i), p, params)
        engine.step()
    pool = engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1  # nothing leaked
    return [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))], engine.trace


@dataclass
class TraceCounts:
    """What the scheduler did in a run: the facts the equality tests assert happened."""

    steps: int
    prefix_hit_tokens: int
    preemptions: int
    mixed_steps: int  # steps with prompt (or recomputed) tokens and decode tokens together
    max_prefill_chunk: int  # the most prompt tokens one request got in one step
    chunked_requests: int  # requests whose prompt took more than one step

    @classmethod
    def of(cls, trace: EngineTrace) -> TraceCounts:
        steps = trace.steps
        prefill_steps: dict[str, int] = {}
        for s in steps:
            for r in s.prefill_tokens:
                prefill_steps[r] = prefill_steps.get(r, 0) + 1
        return cls(
            steps=len(steps),
            prefix_hit_tokens=sum(sum(s.prefix_cache_hit_tokens.values()) for s in steps),
            preemptions=sum(len(s.preempted) for s in steps),
            mixed_steps=sum(1 for s in steps if s.prefill_tokens and s.decode_tokens),
            max_prefill_chunk=max((n for s in steps for n in s.prefill_tokens.values()), default=0),
            chunked_requests=sum(1 for n in prefill_steps.values() if n > 1),
        )
