"""The model layer: flat-token Llama family and its loader (lazy imports: transformers loads only when needed)."""

from __future__ import annotations

from typing import Any

__all__ = ["LlamaArchConfig", "LlamaForCausalLM", "LoadedModel", "load_model", "smollm2_folder"]

_WHERE = {
    "LlamaArchConfig": "minivllm.model.config",
    "LlamaForCausalLM": "minivllm.model.llama",
    "LoadedModel": "minivllm.model.loader",
    "load_model": "minivllm.model.loader",
    "smollm2_folder": "minivllm.model.loader",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'minivllm.model' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
