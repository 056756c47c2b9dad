"""CUDA: the engine's greedy output equals HF transformers on the GPU, with every backend (§11.6).

Skipped without CUDA. Uses SmolLM2 when its wheel is installed, otherwise a random model of
SmolLM2's exact shapes (an offline GPU machine cannot install the wheel).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.slow,  # SmolLM2 (or a model of its shapes) on the GPU
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def cuda_model_folder(tmp_path_factory):
    """The GPU check's model (MINIVLLM_GPU_MODEL, built once for every section), else SmolLM2 or its shapes."""
    import os

    from minivllm.lab.benchmarks.random_model import smollm2_or_random_like

    return os.environ.get("MINIVLLM_GPU_MODEL") or smollm2_or_random_like(str(tmp_path_factory.mktemp("smollm2")))


@pytest.fixture(scope="module")
def reference(cuda_model_folder):
    """The model loaded once on CUDA (fp32), the prompts, and HF's greedy tokens for them."""
    from minivllm.model.loader import load_model
    from tests.helpers.hf_reference import hf_greedy_on, make_prompts

    loaded = load_model(cuda_model_folder, "float32", "cuda")
    prompts = make_prompts(loaded.arch.vocab_size, [7, 90, 300, 33], shared=64)
    return loaded, prompts, hf_greedy_on(cuda_model_folder, prompts, 10, "cuda")


@pytest.mark.parametrize(
    ("backend", "budget", "enforce_eager"),
    [("triton", 32, True), ("triton", 256, True), ("torch", 32, True), ("torch", 256, True), ("triton", 256, False)],
)
def test_cuda_greedy_equals_hf(cuda_model_folder, reference, backend, budget, enforce_eager):
    """``enforce_eager=False``: the decode steps replay CUDA graphs (4 requests: sizes 1, 2, 4 padded from 3)."""
    from minivllm.config import EngineConfig
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.sampling_params import SamplingParams
    from minivllm.worker.model_runner import ModelRunner

    loaded, prompts, expected = reference
    config = EngineConfig.from_kwargs(
        model=cuda_model_folder,
        device="cuda",
        dtype="float32",
        attention_backend=backend,
        max_num_batched_tokens=budget,
        max_num_seqs=8,
        max_model_len=1024,
        num_gpu_blocks=200,
        enforce_eager=enforce_eager,
    )
    runner = ModelRunner(config, loaded)
    engine = LLMEngine(config, model_runner=runner)
    assert (runner.decode_graphs is None) == enforce_eager, runner.eager_reason
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))] == expected
