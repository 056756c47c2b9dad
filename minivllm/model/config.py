"""LlamaArchConfig: the architecture numbers the flat-token Llama needs, read from ``config.json``.

Mirrors the fields vLLM reads from the HF config in ``vllm/model_executor/models/llama.py`` (and
``qwen2.py`` for the qkv bias). It is read from the raw JSON dict so that folders saved by either
transformers 4.x (``rope_theta`` + ``rope_scaling``) or 5.x (``rope_parameters``) work.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")
SUPPORTED_ROPE_TYPES = ("default", "llama3", "linear")


@dataclass
class LlamaArchConfig:
    """Shape and numerics of one Llama-family decoder (Llama, Qwen2, Mistral)."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # None or {"rope_type": "llama3" | "linear", ...}
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2 always; Llama when attention_bias
    o_bias: bool = False  # Llama with attention_bias
    mlp_bias: bool = False
    sliding_window: int | None = None  # recorded only; the paged backends attend to the full context
    torch_dtype: str | None = None

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @classmethod
    def from_dict(cls, cfg: dict[str, Any], source: str = "config.json") -> LlamaArchConfig:
        """Build from a ``config.json`` dict; raises ``ValueError`` for an unsupported architecture and for a
        required field that is missing or not a positive integer (naming ``source``, the file, and the field)."""
        if not isinstance(cfg, dict):
            raise ValueError(f"{source} must hold a JSON object, got {type(cfg).__name__}.")
        archs = cfg.get("architectures") or []
        arch = archs[0] if archs else _ARCH_BY_MODEL_TYPE.get(cfg.get("model_type", ""), "")
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(
                f"Unsupported architecture {arch or cfg.get('model_type')!r}; "
                f"minivllm supports: {', '.join(SUPPORTED_ARCHITECTURES)}."
            )
        _check_required(cfg, source)
        num_heads = cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // num_heads
        theta, scaling = _rope_from_dict(cfg)
        is_qwen2 = arch == "Qwen2ForCausalLM"
        attention_bias = bool(cfg.get("attention_bias", False))
        window = cfg.get("sliding_window") if (not is_qwen2 or cfg.get("use_sliding_window")) else None
        return cls(
            architecture=arch,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=num_heads,
            num_kv_heads=cfg.get("num_key_value_heads") or num_heads,
            head_dim=head_dim,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=is_qwen2 or attention_bias,
            o_bias=attention_bias and not is_qwen2,
            mlp_bias=bool(cfg.get("mlp_bias", False)),
            sliding_window=window,
            torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
        )

    @classmethod
    def from_folder(cls, folder: str) -> LlamaArchConfig:
        """Read ``folder/config.json``."""
        path = os.path.join(folder, "config.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No config.json in model folder {folder!r} (expected an HF model folder).")
        with open(path, encoding="utf-8") as f:
            try:
                cfg = json.load(f)
            except ValueError as e:
                raise ValueError(f"{path} is not valid JSON: {e}.") from e
        return cls.from_dict(cfg, source=path)


# The config.json fields from_dict cannot default, as vLLM's model code reads them from the HF config.
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
POSITIVE_INT_FIELDS = REQUIRED_FIELDS + ("num_key_value_heads", "head_dim", "max_position_embeddings")


def _check_required(cfg: dict[str, Any], source: str) -> None:
    """ValueError naming the file and the field when a required field is missing, or a size is not an int >= 1."""
    missing = [name for name in REQUIRED_FIELDS if name not in cfg]
    if missing:
        raise ValueError(
            f"{source} is missing the required field {missing[0]!r} (a Llama / Qwen2 / Mistral config.json "
            f"needs {', '.join(REQUIRED_FIELDS)})."
        )
    for name in POSITIVE_INT_FIELDS:
        value = cfg.get(name)
        if not value and name not in REQUIRED_FIELDS:  # absent, null or 0: from_dict's fallback applies
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{source}: field {name!r} must be an integer >= 1, got {value!r}.")


_ARCH_BY_MODEL_TYPE = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}


def _rope_from_dict(cfg: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """Return (rope_theta, scaling) from either the 4.x or the 5.x spelling of the rope fields."""
    params = dict(cfg.get("rope_parameters") or {})
    legacy = dict(cfg.get("rope_scaling") or {})
    theta = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    scaling = {**legacy, **params}
    scaling.pop("rope_theta", None)
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(f"Unsupported rope type {rope_type!r}; minivllm supports: {', '.join(SUPPORTED_ROPE_TYPES)}.")
    if rope_type == "default":
        return theta, None
    scaling["rope_type"] = rope_type
    return theta, scaling
