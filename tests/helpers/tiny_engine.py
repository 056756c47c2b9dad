"""A real LLMEngine on a loaded tiny model (CPU), with small defaults: shared by the engine-level tests."""

from __future__ import annotations

from typing import Any

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.worker.model_runner import ModelRunner

DEFAULTS = dict(max_num_batched_tokens=32, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)


def make_engine(loaded: Any, **kwargs: Any) -> LLMEngine:
    """``LLMEngine`` with a ``ModelRunner`` on ``loaded``; ``kwargs`` (vLLM engine-arg names) override DEFAULTS."""
    config = EngineConfig.from_kwargs(model=loaded.hf_folder, device="cpu", **{**DEFAULTS, **kwargs})
    return LLMEngine(config, model_runner=ModelRunner(config, loaded))
