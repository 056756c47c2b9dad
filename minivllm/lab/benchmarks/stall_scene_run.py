"""§11.1's scene run on a real engine, and what it measured (the instructor notebook, ch. 11).

Chats decode; a few steps later a long prompt lands. Unchunked, one step prefills it whole and every chat
waits for that step; chunked, it rides along one chunk a step. ``run_scene`` runs it on
``make_engine(**settings)`` with the sizes ``stall_scene.choose_scene`` picked for the device, and
``SceneRun`` reads off the trace what §11.1.4's table compares: the chats' longest step ("Decode 单步最大延迟")
against a plain decode step. Not in vLLM: a teaching aid.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minivllm.lab.benchmarks.stall_scene import random_prompt
from minivllm.metrics.trace import EngineTrace, StepRecord
from minivllm.sampling_params import SamplingParams

LONG_ID = "long"


@dataclass(frozen=True)
class SceneRun:
    """One run of the scene: its trace, and the step times §11.1 is about (seconds)."""

    trace: EngineTrace
    num_chats: int
    chat_tokens: int  # each chat's output tokens (enough to outlast the long prompt's prefill)

    @property
    def chat_itls(self) -> list[float]:
        return [g for r, rec in self.trace.requests.items() if r.startswith("chat") for g in rec.itls]

    @property
    def decode_step(self) -> float:
        """The median step that decodes every chat and prefills nothing."""
        return statistics.median(
            s.duration
            for s in self.trace.steps
            if not any(s.prefill_tokens.values()) and sum(s.decode_tokens.values()) == self.num_chats
        )

    @property
    def long_steps(self) -> list[StepRecord]:
        """The steps that prefilled (part of) the long prompt."""
        return [s for s in self.trace.steps if s.prefill_tokens.get(LONG_ID)]

    @property
    def slowest_long_step(self) -> float:
        """Unchunked: the stall itself. Chunked: the slowest step with a chunk of the long prompt."""
        return max(s.duration for s in self.long_steps)

    @property
    def long_ttft(self) -> float:
        ttft = self.trace.requests[LONG_ID].ttft
        assert ttft is not None, "the long prompt produced no token"
        return ttft


def run_scene(
    make_engine: Callable[..., Any],
    vocab_size: int,
    long_tokens: int,
    budget: int,
    chunked: bool,
    *,
    num_chats: int = 8,
    chat_prompt_tokens: int = 48,
    min_chat_tokens: int = 64,
    lands_after: int = 8,
    long_output_tokens: int = 8,
    block_size: int = 16,
    seed: int = 0,
) -> SceneRun:
    """``num_chats`` chats decode; ``lands_after`` steps after all of them decode, the ``long_tokens`` prompt
    lands. Chunked: ``max_num_batched_tokens=budget`` (chunks of ``budget - num_chats`` beside the decodes);
    unchunked: a budget that takes the whole prompt in one step. Both runs give each chat the same number of
    output tokens, enough to decode through the whole chunked prefill."""
    chunk = max(budget - num_chats, 1)
    prompt_steps = -(-num_chats * chat_prompt_tokens // chunk)  # the chats' own prompts, chunked
    chat_tokens = max(min_chat_tokens, prompt_steps + lands_after + -(-long_tokens // chunk) + 16)
    max_len = max(long_tokens + long_output_tokens, chat_prompt_tokens + chat_tokens)
    tokens = long_tokens + long_output_tokens + num_chats * (chat_prompt_tokens + chat_tokens)
    engine = make_engine(
        max_num_seqs=num_chats + 1,
        max_model_len=max_len,
        enable_chunked_prefill=chunked,
        max_num_batched_tokens=budget if chunked else max_len + num_chats,
        block_size=block_size,
        num_gpu_blocks=tokens // block_size + num_chats + 3,
    )
    chat = SamplingParams(max_tokens=chat_tokens, ignore_eos=True)
    for i in range(num_chats):
        engine.add_request(f"chat{i}", random_prompt(chat_prompt_tokens, seed + i, vocab_size), chat)
    decoding_since: int | None = None
    while engine.has_unfinished_requests():
        steps = engine.trace.steps
        if decoding_since is None and steps and sum(steps[-1].decode_tokens.values()) == num_chats:
            decoding_since = len(steps)
        if decoding_since is not None and len(steps) - decoding_since == lands_after:
            long = SamplingParams(max_tokens=long_output_tokens, ignore_eos=True)
            engine.add_request(LONG_ID, random_prompt(long_tokens, seed + 99, vocab_size), long)
        engine.step()
    return SceneRun(engine.trace, num_chats, chat_tokens)
