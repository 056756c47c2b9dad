"""Config defaults and validation messages, as vLLM's (§11.7)."""

from __future__ import annotations

import pytest

from minivllm.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig, SpeculativeConfig, flag_name
from minivllm.sampling_params import SamplingParams


def test_v1_defaults():
    s = SchedulerConfig()
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.max_model_len) == (2048, 128, 8192)
    assert s.enable_chunked_prefill and s.long_prefill_token_threshold == 0 and s.policy == "fcfs"
    c = CacheConfig()
    assert c.block_size == 16 and c.enable_prefix_caching
    # Chunked prefill off: the budget must hold a whole max-length prompt.
    assert SchedulerConfig(enable_chunked_prefill=False).max_num_batched_tokens == 8192


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            dict(max_num_batched_tokens=1024, enable_chunked_prefill=False),
            r"max_num_batched_tokens \(1024\) is smaller than max_model_len \(8192\)",
        ),
        (
            dict(max_num_batched_tokens=64, max_num_seqs=128),
            r"max_num_batched_tokens \(64\) must be greater than or equal to max_num_seqs \(128\)",
        ),
        (dict(max_num_batched_tokens=0), r"max_num_batched_tokens must be >= 1, got 0"),
        (dict(max_num_seqs=-3), r"max_num_seqs must be >= 1, got -3"),
        (
            dict(max_model_len=100, long_prefill_token_threshold=101),
            r"long_prefill_token_threshold must be in \[0, 100\], got 101",
        ),
        (
            dict(long_prefill_token_threshold=64, enable_chunked_prefill=False),
            r"long_prefill_token_threshold \(64\) .* needs enable_chunked_prefill=True",
        ),
        (dict(policy="lifo"), r"policy must be one of \('fcfs', 'priority'\), got 'lifo'"),
        (dict(max_num_seqs=2.5), r"max_num_seqs must be an integer, got 2.5"),
    ],
)
def test_scheduler_config_errors_name_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SchedulerConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(block_size=12), r"block_size must be one of \(1, 8, 16, 32, 64, 128, 256\), got 12"),
        (dict(num_gpu_blocks=1), r"num_gpu_blocks must be >= 2, got 1"),
        (dict(gpu_memory_utilization=1.5), r"gpu_memory_utilization must be in \(0, 1\], got 1.5"),
        (dict(prefix_caching_hash_algo="md5"), r"prefix_caching_hash_algo must be 'builtin' or 'sha256'"),
    ],
)
def test_cache_config_errors_name_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CacheConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(max_tokens=0), "max_tokens must be at least 1, got 0"),
        (dict(temperature=-1.0), "temperature must be non-negative"),
        (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
        (dict(top_k=-2), "top_k must be -1"),
        (dict(min_tokens=5, max_tokens=2), "min_tokens must be less than or equal to max_tokens=2"),
    ],
)
def test_sampling_params_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_engine_config_from_vllm_flat_names():
    cfg = EngineConfig.from_kwargs(max_num_batched_tokens=512, block_size=32, model="smollm2", max_num_seqs=8)
    assert cfg.scheduler_config.max_num_batched_tokens == 512
    assert cfg.cache_config.block_size == 32 and cfg.model_config.model == "smollm2"
    with pytest.raises(ValueError, match="Unknown engine argument 'max_batch'"):
        EngineConfig.from_kwargs(max_batch=3)
    assert flag_name("long_prefill_token_threshold") == "--long-prefill-token-threshold"


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (SchedulerConfig, dict(max_num_seqs=True), "max_num_seqs must be an integer, got True"),
        (SchedulerConfig, dict(max_num_batched_tokens=False), "max_num_batched_tokens must be an integer, got False"),
        (SchedulerConfig, dict(max_model_len="8k", enable_chunked_prefill=False), "max_model_len must be an integer"),
        (SchedulerConfig, dict(max_model_len=True), "max_model_len must be an integer, got True"),
        (SchedulerConfig, dict(enable_chunked_prefill=1), "enable_chunked_prefill must be True or False, got 1"),
        (SchedulerConfig, dict(long_prefill_token_threshold=1.5), "long_prefill_token_threshold must be an integer"),
        (SchedulerConfig, dict(policy=["fcfs"]), r"policy must be one of \('fcfs', 'priority'\), got \['fcfs'\]"),
        (CacheConfig, dict(block_size=True), r"block_size must be one of \(1, 8, .*\), got True"),
        (CacheConfig, dict(block_size=16.0), r"block_size must be one of \(1, 8, .*\), got 16.0"),
        (CacheConfig, dict(num_gpu_blocks=True), "num_gpu_blocks must be an integer, got True"),
        (CacheConfig, dict(enable_prefix_caching="yes"), "enable_prefix_caching must be True or False, got 'yes'"),
        (CacheConfig, dict(gpu_memory_utilization=True), r"gpu_memory_utilization must be a number in \(0, 1\]"),
        (CacheConfig, dict(gpu_memory_utilization="0.9"), r"gpu_memory_utilization must be a number in \(0, 1\]"),
        (CacheConfig, dict(gpu_memory_utilization=float("nan")), "gpu_memory_utilization must be in .*, got nan"),
        (CacheConfig, dict(kv_cache_memory_bytes=True), "kv_cache_memory_bytes must be an integer, got True"),
        (CacheConfig, dict(kv_cache_memory_bytes=1e9), "kv_cache_memory_bytes must be an integer, got 1000000000.0"),
        (CacheConfig, dict(prefix_caching_hash_algo=None), "prefix_caching_hash_algo must be 'builtin' or 'sha256'"),
        (ModelConfig, dict(model=""), "model must be a non-empty string"),
        (ModelConfig, dict(model=None), "model must be a non-empty string"),
        (ModelConfig, dict(dtype="int8"), r"dtype must be one of \('auto', 'float32', .*\), got 'int8'"),
        (ModelConfig, dict(device="gpu"), r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' \(N >= 0\), got 'gpu'"),
        (ModelConfig, dict(device="cuda:x"), "device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
        (ModelConfig, dict(attention_backend=3), "attention_backend must be a non-empty string"),
        (ModelConfig, dict(cpu_gemm=["torch"]), "cpu_gemm must be one of"),
        (ModelConfig, dict(seed=True), "seed must be an integer, got True"),
        (ModelConfig, dict(seed=2**64), r"seed must be in \[-9223372036854775808, 18446744073709551615\], got"),
        (SpeculativeConfig, dict(num_speculative_tokens=True), "num_speculative_tokens must be an integer, got True"),
    ],
)
def test_every_engine_config_field_is_type_and_range_checked(cls, kwargs, message):
    """A bool is not an int, 16.0 is not a block size, NaN is not a fraction: each names its parameter first."""
    with pytest.raises(ValueError, match=message) as info:
        cls(**kwargs)
    assert str(info.value).split(" ", 1)[0] == next(iter(kwargs))


def test_valid_model_configs_are_accepted():
    """(That the config's dtype names are the loader's is checked with the loader, in tests/model: torch.)"""
    for kwargs in (dict(device="cuda:1"), dict(device="cpu", dtype="BF16"), dict(seed=2**64 - 1), dict(seed=-1)):
        ModelConfig(**kwargs)
    assert CacheConfig(gpu_memory_utilization=1).gpu_memory_utilization == 1
