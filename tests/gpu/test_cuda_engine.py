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
    from minivllm.lab.benchmarks.random_model import smollm2_or_random_like

    return smollm2_or_random_like(str(tmp_path_factory.mktemp("smollm2_like")))


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("budget", [32, 256])
def test_cuda_greedy_equals_hf(cuda_model_folder, backend, budget):
    from minivllm.config import EngineConfig
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.model.loader import load_model
    from minivllm.sampling_params import SamplingParams
    from minivllm.worker.model_runner import ModelRunner
    from tests.helpers.hf_reference import hf_greedy_on, make_prompts

    loaded = load_model(cuda_model_folder, "float32", "cuda")
    prompts = make_prompts(loaded.arch.vocab_size, [7, 90, 300, 33], shared=64)
    expected = hf_greedy_on(cuda_model_folder, prompts, 10, "cuda")
    config = EngineConfig.from_kwargs(
        model=cuda_model_folder,
        device="cuda",
        dtype="float32",
        attention_backend=backend,
        max_num_batched_tokens=budget,
        max_num_seqs=8,
        max_model_len=1024,
        num_gpu_blocks=200,
    )
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))] == expected
