"""The engine flags of every command, derived from the config dataclasses, and one way to build an engine.

Mirrors ``vllm/engine/arg_utils.py``: ``EngineArgs.add_cli_args`` (one argument group per config class, the
flags read off its fields), ``EngineArgs.from_cli_args`` (:func:`engine_kwargs`) and
``create_engine_config`` + ``LLMEngine.from_engine_args`` (:func:`build_engine`).

Rule: each field of ModelConfig, CacheConfig, SchedulerConfig and SpeculativeConfig (``minivllm/config.py``) is
one flag named by ``config.flag_name`` (``max_num_seqs`` -> ``--max-num-seqs``); a bool is ``--x / --no-x``
(``argparse.BooleanOptionalAction``), an int / float / str takes the field's type. Every flag defaults to None,
meaning "the config's default" (:func:`engine_kwargs` drops it), except ``--model``: a command names the model
before any config exists, so it defaults to ModelConfig's own default. Values are checked by the config classes,
whose errors name the field.
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from minivllm.config import (
    BLOCK_SIZES,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    CacheConfig,
    EngineConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    flag_name,
    resolve_auto_dtype,
)

if TYPE_CHECKING:
    from minivllm.core.scheduler import Scheduler
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.model.loader import LoadedModel
    from minivllm.worker.base import ModelRunnerBase

CONFIG_CLASSES = (ModelConfig, CacheConfig, SchedulerConfig, SpeculativeConfig)  # EngineConfig.from_kwargs's parts
KEEP_DEFAULT = ("model",)  # flags whose argparse default is the config's default instead of None
_NAMES_DEST = "_engine_arg_names"  # set by add_engine_args: the fields this parser's engine flags set

HELP = {  # field -> what its flag means; where the default is None, what None means
    "model": "'smollm2', a local HF folder or a hub id org/name, through the HF cache (Llama / Qwen2 / Mistral)",
    "dtype": "weights and activations: auto (bfloat16 on CUDA, float32 otherwise), float32, bfloat16 or float16",
    "device": "auto (cuda if available, else cpu), cpu, cuda or cuda:N",
    "attention_backend": "auto, torch, triton or flash_attn (auto: $MINIVLLM_ATTENTION_BACKEND, else by device)",
    "cpu_gemm": "how linear layers run on a CPU: auto, onednn or torch (model/cpu_gemm.py)",
    "seed": "seed of the engine's default sampling generator",
    "max_logprobs": "the most log-probabilities one request may ask for (SamplingParams.logprobs, the server's "
    "logprobs / top_logprobs)",
    "enforce_eager": "run every step eagerly; --no-enforce-eager captures CUDA graphs of the pure-decode steps "
    "(batch sizes 1, 2, 4, 8, 16, ... up to max_num_seqs; CUDA and the triton backend only, else eager with a "
    "warning). vLLM's default is graphs; here eager until a GPU has compared their tokens",
    "block_size": f"tokens per KV cache block, one of {', '.join(map(str, BLOCK_SIZES))}",
    "num_gpu_blocks": "KV cache blocks (default: as many as --gpu-memory-utilization / --kv-cache-memory-bytes allow)",
    "enable_prefix_caching": "reuse the KV blocks of an already computed prompt prefix",
    "prefix_caching_hash_algo": "hash of a full block for prefix caching: builtin or sha256",
    "gpu_memory_utilization": "CUDA: fraction of device memory for weights, activations and the KV cache",
    "kv_cache_memory_bytes": "CPU: bytes for the KV cache (default: 1 GiB)",
    "max_num_batched_tokens": f"the token budget of one step (default: {DEFAULT_MAX_NUM_BATCHED_TOKENS} with chunked "
    f"prefill, else max(max_model_len, {DEFAULT_MAX_NUM_BATCHED_TOKENS}))",
    "max_num_seqs": f"at most this many requests running at once (default: {DEFAULT_MAX_NUM_SEQS})",
    "max_model_len": "prompt + output tokens of one request (default: the model's context length, at most "
    f"{DEFAULT_MAX_MODEL_LEN})",
    "long_prefill_token_threshold": "at most this many prompt tokens of one request per step; 0 = no cap",
    "enable_chunked_prefill": "split long prompts into chunks that share steps with decodes",
    "policy": "fcfs or priority",
    "scheduler_reserve_full_isl": "admit a waiting request only if KV blocks for its whole prompt fit now, not just "
    "its first chunk (later vLLM's rule against admit-then-preempt thrash, on by default there; off here as in "
    "vLLM 0.8.5)",
    "async_scheduling": "schedule step N+1 while step N runs on a worker thread; step N's tokens are applied one "
    "step late (vLLM 0.10's async scheduling; not with speculative decoding or guided_choice)",
    "num_speculative_tokens": "n-gram (prompt lookup) draft tokens proposed per step; 0 = no speculative decoding",
    "prompt_lookup_max": "longest n-gram looked up in the request's own tokens",
    "prompt_lookup_min": "shortest n-gram looked up in the request's own tokens",
}


@dataclass(frozen=True)
class EngineArg:
    """One engine flag: the config field it sets (also its argparse dest), that field's type and default."""

    name: str
    type: builtins.type  # bool, int, float or str
    config: builtins.type  # the config dataclass that owns the field
    default: Any  # the config's default; None: worked out by the config (see the help)
    help: str

    @property
    def flag(self) -> str:
        return flag_name(self.name)


def _derive() -> dict[str, EngineArg]:
    args: dict[str, EngineArg] = {}
    for cls in CONFIG_CLASSES:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kinds = [t for t in typing.get_args(hints[f.name]) if t is not type(None)] or [hints[f.name]]
            if len(kinds) != 1 or kinds[0] not in (bool, int, float, str) or f.name in args:
                raise TypeError(f"{cls.__name__}.{f.name}: no engine flag for type {hints[f.name]!r}")
            default = None if f.default is dataclasses.MISSING else f.default
            args[f.name] = EngineArg(f.name, kinds[0], cls, default, HELP.get(f.name, ""))
    return args


ENGINE_ARGS: dict[str, EngineArg] = _derive()  # field -> its flag, in the config classes' order


def add_engine_args(
    parser: argparse.ArgumentParser, only: Iterable[str] | None = None, exclude: Iterable[str] = ()
) -> tuple[str, ...]:
    """Add the engine flags (all, or the fields in ``only``, less ``exclude``) to ``parser``, one argument group
    per config class; returns the fields added, which :func:`engine_kwargs` reads back."""
    wanted, skip = (None if only is None else set(only)), set(exclude)
    unknown = ((wanted or set()) | skip) - set(ENGINE_ARGS)
    if unknown:
        raise ValueError(f"not engine arguments: {sorted(unknown)}; allowed: {sorted(ENGINE_ARGS)}")
    names = tuple(n for n in ENGINE_ARGS if (wanted is None or n in wanted) and n not in skip)
    groups: dict[type, Any] = {}
    for name in names:
        arg = ENGINE_ARGS[name]
        if arg.config not in groups:
            title = (arg.config.__doc__ or arg.config.__name__).splitlines()[0]  # a dataclass always has a __doc__
            groups[arg.config] = parser.add_argument_group(arg.config.__name__, title)
        shown = (arg.help if arg.default is None else f"{arg.help} (default: {arg.default})").replace("%", "%%")
        kw: dict[str, Any] = {"default": arg.default if name in KEEP_DEFAULT else None, "help": shown}
        if arg.type is bool:
            groups[arg.config].add_argument(arg.flag, action=argparse.BooleanOptionalAction, **kw)
        else:
            groups[arg.config].add_argument(arg.flag, type=arg.type, **kw)
    parser.set_defaults(**{_NAMES_DEST: names})
    return names


def engine_kwargs(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The engine arguments set on the command line (``overrides``, e.g. a sweep point, win), Nones dropped,
    in the config classes' field order: what :func:`build_engine` and ``EngineConfig.from_kwargs`` take."""
    overrides = overrides or {}
    names = getattr(args, _NAMES_DEST, tuple(ENGINE_ARGS))
    values = {n: overrides.get(n, getattr(args, n, None)) for n in names}
    return {n: v for n, v in values.items() if v is not None}


def load_engine_model(model: str, device: str = "auto", dtype: str = "auto") -> LoadedModel:
    """Load ``model`` as a ModelRunner with this ModelConfig would: on its device, in its dtype ("auto" resolved
    by ``config.resolve_auto_dtype``)."""
    from minivllm.model.loader import load_model, resolve_dtype
    from minivllm.worker.model_runner import resolve_device

    torch_device = resolve_device(device)
    return load_model(model, resolve_dtype(resolve_auto_dtype(dtype, torch_device.type)), torch_device)


def build_engine(
    make_runner: Callable[[EngineConfig], ModelRunnerBase] | None = None,
    loaded: LoadedModel | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    **kwargs: Any,
) -> LLMEngine:
    """An LLMEngine for these engine arguments (vLLM's flat names, as :func:`engine_kwargs` gives them).

    The config is built first, so a bad value fails before any model loads. ``make_runner`` None: the real
    ModelRunner on ``loaded`` (loaded here, per the config, when None); otherwise ``make_runner(config)`` is the
    model runner (the simulator, a wrapper). Without ``max_model_len``, a loaded model's context length caps the
    default, as vLLM's ``_get_and_verify_max_len`` does: min(max_position_embeddings, DEFAULT_MAX_MODEL_LEN).
    """
    from minivllm.core.scheduler import Scheduler
    from minivllm.engine.llm_engine import LLMEngine

    config = EngineConfig.from_kwargs(**kwargs)
    if make_runner is None and loaded is None:
        mc = config.model_config
        loaded = load_engine_model(mc.model, mc.device, mc.dtype)
    if loaded is not None and "max_model_len" not in kwargs:
        max_len = min(loaded.arch.max_position_embeddings, DEFAULT_MAX_MODEL_LEN)
        config = EngineConfig.from_kwargs(**kwargs, max_model_len=max_len)
    runner: ModelRunnerBase
    if make_runner is None:
        from minivllm.worker.model_runner import ModelRunner

        runner = ModelRunner(config, loaded)
    else:
        runner = make_runner(config)
    return LLMEngine(config, model_runner=runner, scheduler_cls=scheduler_cls or Scheduler)
