"""KV-cache sizing from gpu_memory_utilization after a profiling run (minivllm/worker/device_memory.py),
driven by a stand-in memory report so the CUDA branch runs here; vLLM: gpu_worker.determine_available_memory."""

from __future__ import annotations

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams
from minivllm.worker.device_memory import MemoryProfile, profile_memory
from minivllm.worker.model_runner import ModelRunner
from tests.helpers.device_memory import FakeDeviceMemory
from tests.helpers.hf_reference import hf_greedy, make_prompts

GIB = 1 << 30


def test_budget_is_utilisation_minus_peak_minus_what_torch_did_not_allocate():
    mem = FakeDeviceMemory(total=80 * GIB, torch_peak=3 * GIB, torch_now=GIB, others=GIB // 2, cached=2 * GIB)
    order = []
    prof = profile_memory(mem, lambda: order.append(len(mem.calls)))
    # The profiling run happens after the reset, the peak is read after it, and the cache is emptied before
    # "others" is measured (else torch's cached blocks would count as someone else's memory).
    assert mem.calls[: order[0]] == ["empty_cache", "reset_peak_memory_stats", "mem_get_info"]
    assert mem.calls[order[0] :] == [
        "synchronize",
        "max_memory_allocated",
        "empty_cache",
        "mem_get_info",
        "memory_allocated",
    ]
    assert prof == MemoryProfile(total=80 * GIB, torch_peak=3 * GIB, non_torch=GIB // 2)
    assert prof.kv_cache_budget(0.9) == int(80 * GIB * 0.9) - 3 * GIB - GIB // 2


def test_non_torch_memory_is_never_negative():
    mem = FakeDeviceMemory(total=16 * GIB, torch_peak=GIB, torch_now=GIB, others=0)
    mem.torch_now = 2 * GIB  # torch reports more than the driver sees in use: no negative "others"
    assert profile_memory(mem, lambda: None).non_torch == 0


def _cuda_sized_engine(loaded, mem, **kwargs):
    config = EngineConfig.from_kwargs(
        model=loaded.hf_folder, device="cpu", dtype="float32", max_model_len=256, max_num_seqs=4, **kwargs
    )
    runner = ModelRunner(config, loaded)
    runner.device_memory = mem  # the test hook: the CUDA sizing branch, with a real profiling forward
    forwards = []
    real_forward = runner._forward
    runner._forward = lambda ids, meta: forwards.append(len(ids)) or real_forward(ids, meta)
    return LLMEngine(config, model_runner=runner), forwards


def test_engine_sizes_its_kv_cache_from_gpu_memory_utilization(tiny):
    mem = FakeDeviceMemory(total=GIB, torch_peak=300 << 20, torch_now=200 << 20, others=100 << 20)
    engine, forwards = _cuda_sized_engine(tiny, mem, gpu_memory_utilization=0.5, max_num_batched_tokens=96)
    block_bytes = engine.model_runner.block_bytes
    expected = (GIB // 2 - (300 << 20) - (100 << 20)) // block_bytes
    assert engine.config.cache_config.num_gpu_blocks == expected
    assert engine.scheduler.kv_cache_manager.block_pool.num_gpu_blocks == expected
    assert forwards == [96]  # one warm-up forward over the full token budget, before any request
    mem.calls.clear()
    # The cache it sized serves requests: greedy tokens equal HF's.
    prompts = make_prompts(tiny.arch.vocab_size, [9, 40], shared=16)
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert [engine.outputs[str(i)].outputs[0].token_ids for i in range(2)] == hf_greedy(tiny.hf_folder, prompts, 5)
    assert mem.calls.count("synchronize") >= 2 * len(engine.trace.steps)  # the clock waits for the device


def test_too_little_memory_names_gpu_memory_utilization(tiny):
    mem = FakeDeviceMemory(total=GIB, torch_peak=GIB // 2, torch_now=GIB // 4, others=0)
    with pytest.raises(ValueError, match=r"gpu_memory_utilization=0\.5 of 1073741824 bytes.*raise gpu_memory_util"):
        _cuda_sized_engine(tiny, mem, gpu_memory_utilization=0.5)


def test_a_cache_larger_than_the_device_names_gpu_memory_utilization(tiny):
    mem = FakeDeviceMemory(total=1 << 20, torch_peak=0, torch_now=0, others=0)
    with pytest.raises(ValueError, match=r"more than the device's 1048576 bytes.*lower gpu_memory_utilization"):
        _cuda_sized_engine(tiny, mem, num_gpu_blocks=10_000)
