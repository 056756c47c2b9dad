"""Engine configuration with vLLM's field names, defaults and validation messages (§11.7).

Mirrors ``vllm/config.py`` (SchedulerConfig, CacheConfig) and the V1 defaults of
``vllm/engine/arg_utils.py``: chunked prefill on, prefix caching on. Every bad
value raises ``ValueError`` naming the parameter, its value and what is
allowed, before any engine state exists.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from minivllm.sampling_params import SEED_MAX, SEED_MIN  # the model seed goes to torch.Generator too

DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048  # vllm/config.py _DEFAULT_MAX_NUM_BATCHED_TOKENS
DEFAULT_MAX_NUM_SEQS = 128
DEFAULT_MAX_MODEL_LEN = 8192
SCHEDULING_POLICIES = ("fcfs", "priority")
# vLLM 0.8.5 allows {1, 8, 16, 32, 64, 128} (a Literal, through 0.11); 256 is added for upstream
# FlashAttention-2's page rule. Later vLLM (by 0.33) takes any size > 0; minivllm keeps 0.8.5's list, so 2 and 4,
# which vLLM's own tests give the KV-cache manager directly, are refused here (the manager itself takes them).
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


# ModelConfig.dtype: "auto" or a name model/loader.py's DTYPES maps to a torch dtype (any case).
DTYPE_NAMES = ("auto", "float32", "fp32", "float", "bfloat16", "bf16", "float16", "fp16", "half")


def resolve_auto_dtype(dtype: str, device_type: str) -> str:
    """ModelConfig.dtype with "auto" made concrete: "bfloat16" on CUDA, "float32" on anything else.

    The one place for this rule (vLLM's ``_get_and_verify_dtype`` in ``vllm/config.py`` decides "auto" from
    the model and the device); any other name is returned unchanged. Takes ``torch.device.type``, not torch.
    """
    if dtype != "auto":
        return dtype
    return "bfloat16" if device_type == "cuda" else "float32"


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    """An int (a bool is not one) in [low, high]; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value}.")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}.")


def _check_str(name: str, value: Any, allowed: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string ({allowed}), got {value!r}.")


@dataclass
class SchedulerConfig:
    """How the scheduler spends each step's token budget (vLLM ``SchedulerConfig``).

    ``scheduler_reserve_full_isl`` is a later-vLLM rule (PR #37307, ``vllm/config/scheduler.py``, True by
    default there): a waiting or preempted request is admitted only when the free KV blocks can hold its whole
    current sequence (prompt + outputs so far, less prefix-cache hits), not just its first chunk; this stops the
    admit-then-preempt thrash of chunked prefill under KV pressure (§11.8.3). It is off by default here because
    minivllm mirrors vLLM 0.8.5, which checks the first chunk's blocks only.
    """

    max_num_batched_tokens: int | None = None  # the token budget per step
    max_num_seqs: int | None = None  # at most this many requests RUNNING at once
    max_model_len: int | None = None  # prompt + output tokens of one request
    long_prefill_token_threshold: int = 0  # cap on one request's tokens per step; 0 = off
    enable_chunked_prefill: bool = True  # V1 default
    policy: str = "fcfs"  # or "priority" (vLLM 0.9.x)
    scheduler_reserve_full_isl: bool = False  # admit only if the whole sequence fits (later vLLM; 0.8.5: off)
    # vLLM 0.10: schedule step N+1 while step N runs; step N's tokens are applied one step late
    # (``minivllm.core.async_scheduler``). Off by default, as in vLLM 0.10 and 0.11.
    async_scheduling: bool = False

    def __post_init__(self) -> None:
        if self.max_model_len is None:
            self.max_model_len = DEFAULT_MAX_MODEL_LEN
        _check_int("max_model_len", self.max_model_len, 1)  # both feed the default budget below
        _check_bool("enable_chunked_prefill", self.enable_chunked_prefill)
        if self.max_num_seqs is None:
            self.max_num_seqs = DEFAULT_MAX_NUM_SEQS
        if self.max_num_batched_tokens is None:
            if self.enable_chunked_prefill:
                self.max_num_batched_tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS
            else:
                self.max_num_batched_tokens = max(self.max_model_len, DEFAULT_MAX_NUM_BATCHED_TOKENS)
        self.verify()

    def verify(self) -> None:
        _check_int("max_model_len", self.max_model_len, 1)
        _check_int("max_num_seqs", self.max_num_seqs, 1)
        _check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        # _check_int raised for None: this tells the type checker so (the asserts never fail).
        assert self.max_model_len is not None and self.max_num_seqs is not None
        assert self.max_num_batched_tokens is not None
        _check_int("long_prefill_token_threshold", self.long_prefill_token_threshold, 0, self.max_model_len)
        _check_bool("scheduler_reserve_full_isl", self.scheduler_reserve_full_isl)
        _check_bool("async_scheduling", self.async_scheduling)
        if not isinstance(self.policy, str) or self.policy not in SCHEDULING_POLICIES:
            raise ValueError(f"policy must be one of {SCHEDULING_POLICIES}, got {self.policy!r}.")
        if self.max_num_batched_tokens < self.max_model_len and not self.enable_chunked_prefill:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is smaller than max_model_len "
                f"({self.max_model_len}). This effectively limits the maximum sequence length to "
                "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
                "max_num_batched_tokens or decrease max_model_len (or enable chunked prefill)."
            )
        if self.long_prefill_token_threshold > 0 and not self.enable_chunked_prefill:
            raise ValueError(
                f"long_prefill_token_threshold ({self.long_prefill_token_threshold}) splits prompts into chunks, "
                "so it needs enable_chunked_prefill=True; with chunked prefill off it must be 0."
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be greater than or equal to "
                f"max_num_seqs ({self.max_num_seqs})."
            )


@dataclass
class CacheConfig:
    """The paged KV cache (vLLM ``CacheConfig``)."""

    block_size: int = 16
    num_gpu_blocks: int | None = None  # None: sized from memory by the model runner
    enable_prefix_caching: bool = True  # V1 default
    prefix_caching_hash_algo: str = "builtin"
    gpu_memory_utilization: float = 0.9  # CUDA: fraction of device memory for weights + activations + KV
    kv_cache_memory_bytes: int | None = None  # CPU: bytes for the KV cache (None: 1 GiB)

    def __post_init__(self) -> None:
        self.verify()

    def verify(self) -> None:
        bs = self.block_size
        if isinstance(bs, bool) or not isinstance(bs, int) or bs not in BLOCK_SIZES:  # True == 1, 16.0 == 16
            raise ValueError(f"block_size must be one of {BLOCK_SIZES}, got {bs!r}.")
        if self.num_gpu_blocks is not None:
            _check_int("num_gpu_blocks", self.num_gpu_blocks, 2)
        _check_bool("enable_prefix_caching", self.enable_prefix_caching)
        if not isinstance(self.prefix_caching_hash_algo, str) or self.prefix_caching_hash_algo not in (
            "builtin",
            "sha256",
        ):
            raise ValueError(
                f"prefix_caching_hash_algo must be 'builtin' or 'sha256', got {self.prefix_caching_hash_algo!r}."
            )
        util = self.gpu_memory_utilization
        if isinstance(util, bool) or not isinstance(util, numbers.Real):
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {util!r}.")
        if not (math.isfinite(util) and 0.0 < util <= 1.0):
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {util}.")
        if self.kv_cache_memory_bytes is not None:
            _check_int("kv_cache_memory_bytes", self.kv_cache_memory_bytes, 1)


CPU_GEMMS = ("auto", "onednn", "torch")  # ModelConfig.cpu_gemm; model/cpu_gemm.py resolves "auto"


@dataclass
class ModelConfig:
    """Which model, on which device, in which dtype, with which attention backend."""

    model: str = "smollm2"  # "smollm2", a local Hugging Face folder or a hub id "org/name" (Llama, Qwen2, Mistral)
    dtype: str = "auto"  # auto: float32 on CPU, bfloat16 on CUDA
    device: str = "auto"  # auto: cuda if available, else cpu
    attention_backend: str = "auto"  # auto | torch | triton | flash_attn
    cpu_gemm: str = "auto"  # auto | onednn | torch: how linear layers run on a CPU (model/cpu_gemm.py)
    seed: int = 0
    max_logprobs: int = 20  # vLLM's: the most log-probabilities a request may ask for (SamplingParams.logprobs)
    # CUDA graphs for pure-decode steps (worker/cuda_graphs.py) unless True. vLLM's flag; its default is False
    # (graphs on). minivllm keeps True (eager) until a GPU run has compared graph and eager tokens.
    enforce_eager: bool = True

    def __post_init__(self) -> None:
        _check_str("model", self.model, "'smollm2', a local Hugging Face folder or a hub id 'org/name'")
        if not isinstance(self.dtype, str) or self.dtype.lower() not in DTYPE_NAMES:
            raise ValueError(f"dtype must be one of {DTYPE_NAMES}, got {self.dtype!r}.")
        dev = self.device
        if not isinstance(dev, str) or not (dev in ("auto", "cpu", "cuda") or _is_cuda_index(dev)):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N >= 0), got {dev!r}.")
        # Its allowed values are checked where it is resolved (attention/backend.py, with the environment variable).
        _check_str("attention_backend", self.attention_backend, "auto, torch, triton or flash_attn")
        if not isinstance(self.cpu_gemm, str) or self.cpu_gemm not in CPU_GEMMS:
            raise ValueError(f"cpu_gemm must be one of {CPU_GEMMS}, got {self.cpu_gemm!r}")
        _check_int("seed", self.seed, SEED_MIN, SEED_MAX)
        _check_int("max_logprobs", self.max_logprobs, 0)
        _check_bool("enforce_eager", self.enforce_eager)


def _is_cuda_index(device: str) -> bool:
    kind, _, index = device.partition(":")
    return kind == "cuda" and index.isdigit() and index.isascii()


@dataclass
class SpeculativeConfig:
    """N-gram (prompt lookup) speculative decoding, §11.8.2 (vLLM ``speculative_config`` with method "ngram").

    ``num_speculative_tokens`` = 0 turns it off. Drafts share the token budget with everything else.
    """

    num_speculative_tokens: int = 0
    prompt_lookup_max: int = 4
    prompt_lookup_min: int = 1

    def __post_init__(self) -> None:
        _check_int("num_speculative_tokens", self.num_speculative_tokens, 0, 64)
        _check_int("prompt_lookup_max", self.prompt_lookup_max, 1)
        _check_int("prompt_lookup_min", self.prompt_lookup_min, 1, self.prompt_lookup_max)


@dataclass
class EngineConfig:
    """Everything an LLMEngine needs. ``EngineConfig.from_kwargs`` takes vLLM's flat names."""

    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    speculative_config: SpeculativeConfig = field(default_factory=SpeculativeConfig)

    def __post_init__(self) -> None:
        self.verify()

    def verify(self) -> None:
        """Combinations of the parts: async scheduling refuses speculative decoding, as vLLM 0.10's
        ``EngineArgs.create_engine_config`` does (the drafts of step N+1 would come from step N's output)."""
        n = self.speculative_config.num_speculative_tokens
        if self.scheduler_config.async_scheduling and n > 0:
            raise ValueError(
                f"async_scheduling=True does not support speculative decoding (num_speculative_tokens={n}): "
                "set num_speculative_tokens=0 or async_scheduling=False (vLLM 0.10 refuses the same)."
            )

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> EngineConfig:
        """Build from flat keyword arguments named as vLLM's (``max_num_batched_tokens=512, ...``)."""
        classes = (ModelConfig, CacheConfig, SchedulerConfig, SpeculativeConfig)
        parts: dict[type, dict[str, Any]] = {c: {} for c in classes}
        owners = {f.name: c for c in parts for f in dataclasses.fields(c)}
        for name, value in kwargs.items():
            if name not in owners:
                raise ValueError(f"Unknown engine argument {name!r}; allowed: {sorted(owners)}.")
            parts[owners[name]][name] = value
        return cls(
            ModelConfig(**parts[ModelConfig]),
            CacheConfig(**parts[CacheConfig]),
            SchedulerConfig(**parts[SchedulerConfig]),
            SpeculativeConfig(**parts[SpeculativeConfig]),
        )


def flag_name(field_name: str) -> str:
    """CLI flag for a config field, as vLLM derives them: ``max_num_seqs`` -> ``--max-num-seqs``."""
    return "--" + field_name.replace("_", "-")
