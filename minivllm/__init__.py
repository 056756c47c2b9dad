"""minivllm: a readable vLLM V1 engine core that serves a real model (book ch. 3-5, 11).

Public API: ``LLM``, ``LLMEngine``, ``SamplingParams``, ``EngineConfig`` (and the
configs it groups). Heavy modules (torch, transformers) load only when used.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if "torch" not in sys.modules:
    # A deviation from vLLM, for busy laptops: torch's OpenMP (libgomp) worker threads spin while they wait
    # for work (OMP_WAIT_POLICY=ACTIVE behaviour). When the laptop's cores are busy with other programs, the
    # spinning threads take the CPU the working thread needs. Measured on a 2-core machine at load ~10
    # (4 prompts x 32 greedy tokens, SmolLM2): 19.8 s wall / 13.8 s CPU spinning against 1.8 s / 1.8 s with
    # PASSIVE. PASSIVE threads sleep instead. libgomp reads the variable once, when torch is first imported,
    # so it is set only if minivllm is imported first; set OMP_WAIT_POLICY yourself to choose otherwise.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from minivllm.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
from minivllm.sampling_params import SamplingParams

if TYPE_CHECKING:
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.entrypoints.llm import LLM

__all__ = ["LLM", "LLMEngine", "SamplingParams", "EngineConfig", "ModelConfig", "CacheConfig", "SchedulerConfig"]


def __getattr__(name: str):
    if name == "LLM":
        from minivllm.entrypoints.llm import LLM

        return LLM
    if name == "LLMEngine":
        from minivllm.engine.llm_engine import LLMEngine

        return LLMEngine
    raise AttributeError(f"module 'minivllm' has no attribute {name!r}")
