"""minivllm: a readable vLLM V1 engine core that serves a real model (book ch. 3-5, 11).

Public API: ``LLM``, ``LLMEngine``, ``SamplingParams``, ``EngineConfig`` (and the
configs it groups). Heavy modules (torch, transformers) load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
