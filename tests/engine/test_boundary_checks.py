"""Bad input refused before it reaches a step (issue 13, finding 8): stop ids outside the vocabulary, a KV cache
that cannot be allocated, ``LLM.generate([])``. Each used to fail later, inside the engine."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.worker.model_runner import ModelRunner
from tests.helpers.tiny_engine import make_engine


def run(engine: LLMEngine) -> None:
    while engine.has_unfinished_requests():
        engine.step()


@pytest.mark.parametrize("stop_id", [320, 10**6])
def test_stop_token_ids_outside_the_vocabulary_are_refused_in_add_request(tiny, stop_id):
    """Before: accepted, then min_tokens >= 1 indexed the logits with it (IndexError inside the step)."""
    engine = make_engine(tiny)
    params = SamplingParams(max_tokens=4, min_tokens=2, temperature=0.0, stop_token_ids=[5, stop_id])
    with pytest.raises(
        ValueError,
        match=rf"stop_token_ids of request 'bad': token id {stop_id} is out of range; "
        r"allowed 0\.\.319\.",
    ) as info:
        engine.add_request("bad", [5, 6, 7], params)
    assert str(info.value).split(" ", 1)[0] == "stop_token_ids"
    assert "bad" not in engine.outputs and not engine.has_unfinished_requests()
    engine.add_request(
        "ok",
        [5, 6, 7],
        SamplingParams(max_tokens=4, min_tokens=2, temperature=0.0, stop_token_ids=[319], ignore_eos=True),
    )
    run(engine)
    assert len(engine.outputs["ok"].outputs[0].token_ids) >= 2


def test_a_kv_cache_larger_than_the_machine_names_the_parameter_and_the_bytes(tiny):
    """Before: num_gpu_blocks=10**9 gave the allocator's own RuntimeError, naming no parameter."""
    with pytest.raises(ValueError) as info:
        make_engine(tiny, num_gpu_blocks=10**9)
    msg = str(info.value)
    block = 2 * 2 * 16 * 2 * 16 * 4  # K and V, 2 layers, 16 tokens, 2 KV heads, head_dim 16, fp32
    assert msg.startswith("num_gpu_blocks=1000000000: the KV cache asks for ")
    assert f"{10**9 * block} bytes" in msg and "Lower num_gpu_blocks" in msg and "kv_cache_memory_bytes" in msg


def test_a_kv_budget_larger_than_the_machine_names_kv_cache_memory_bytes(tiny):
    with pytest.raises(ValueError, match=r"the KV cache asks for \d+ bytes .* lower kv_cache_memory_bytes"):
        make_engine(tiny, num_gpu_blocks=None, kv_cache_memory_bytes=10**16)


def test_an_allocator_failure_becomes_a_value_error(tiny, monkeypatch):
    import minivllm.worker.model_runner as model_runner

    config = EngineConfig.from_kwargs(model=tiny.hf_folder, device="cpu", max_model_len=256, num_gpu_blocks=64)
    runner = ModelRunner(config, tiny)

    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 524288 bytes.")

    monkeypatch.setattr(model_runner.torch, "zeros", no_memory)
    with pytest.raises(
        ValueError,
        match=r"num_gpu_blocks=64: the KV cache asks for 524288 bytes .* the allocation "
        r"failed: DefaultCPUAllocator: not enough memory",
    ):
        LLMEngine(config, model_runner=runner)


def test_generate_with_no_prompts_returns_nothing_and_steps_nothing(tiny):
    """vLLM returns [] for ``generate([])``; it must not run (or fail on) anyone else's queued request."""
    llm = LLM(
        tiny.hf_folder, device="cpu", max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64
    )
    assert llm.generate([]) == [] and llm.generate([], SamplingParams(), use_tqdm=False) == []
    llm.engine.add_request("other", [5, 6, 7], SamplingParams(max_tokens=3, temperature=0.0))
    assert llm.generate([], use_tqdm=False) == [] and len(llm.engine.trace.steps) == 0
    with pytest.raises(ValueError, match="sampling_params: got 1 for 0 prompts"):
        llm.generate([], [SamplingParams()])
