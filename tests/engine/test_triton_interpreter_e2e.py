"""The whole engine on the Triton kernel (``attention_backend="triton"``) under ``TRITON_INTERPRET=1`` on
CPU, fp32: greedy tokens equal HF ``generate`` on the tiny random Llama and Qwen2 (§11.3-§11.6).

tests/attention/test_triton_backend.py checks the kernel one call at a time; here it runs every layer of
every step of real schedules: chunks cut by the token budget and by long_prefill_token_threshold, prompt
chunks sharing steps with decodes, prefix-cache hits (a fully cached prompt and a shared prefix) and a
preempted request recomputed. The tokens are exact, so a kernel that is wrong for one such batch shows;
each call's output (and cache write) is also compared with the torch backend's on the same inputs, which
shows smaller errors too.

Interpreter mode must be on before ``triton`` is first imported (see that file's docstring), and an
earlier test of the same session may already have imported it in compiled mode. So all runs happen in
ONE fresh subprocess (tests/helpers/triton_interp_e2e.py, ``TRITON_INTERPRET=1`` from its start) that
writes JSON, whatever this process imported (HF ``generate``, which makes the references, imports triton
in compiled mode itself); each test asserts on one (model, scenario) of that JSON.
The interpreter costs per kernel launch x program, so the schedules are short (6 new tokens, <= 3
requests, ~22 steps per model): the file took 22 s on two cores at load 1 (pytest time, 28 s wall).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minivllm.attention.triton_utils import triton_available
from tests.helpers.hf_reference import hf_greedy, make_prompts

pytestmark = pytest.mark.skipif(not triton_available(), reason="the 'triton' package is not installed")

ROOT = Path(__file__).resolve().parents[2]
NEW_TOKENS = 6
MODELS = ("tiny_llama", "tiny_qwen2")
BUDGET, THRESHOLD = 10, 8

_SHARED, _ALONE = make_prompts(320, [32, 9], shared=8, seed=1)  # 40 and 17 tokens, sharing 8 (one block)
PROMPTS = {
    # 0 arrives at step 0; its twin at step 4, when all 5 of its blocks are cached: it is given 4 (the
    # last-token rule) and recomputes the last. 2 at step 8 (the shared block). 40 tokens: the last chunks
    # and the decodes read more than one key tile (32 keys a tile for prompts, 16 for decodes).
    "chunked_prefix_mixed": [_SHARED, _SHARED, _ALONE],
    "tiny_pool_preempts": make_prompts(320, [12, 11], seed=2),
}
ENGINE = {
    "chunked_prefix_mixed": dict(
        block_size=8,
        num_gpu_blocks=64,
        max_model_len=64,
        max_num_batched_tokens=BUDGET,
        long_prefill_token_threshold=THRESHOLD,
        arrivals=[0, 4, 8],
    ),
    # 4 usable blocks of 8 for two requests that grow to 3 blocks each: one is preempted and recomputed.
    "tiny_pool_preempts": dict(block_size=8, num_gpu_blocks=5, max_model_len=32, max_num_batched_tokens=32),
}
CASES = [(m, s) for m in MODELS for s in PROMPTS]


@pytest.fixture(scope="module")
def folders(tiny_llama, tiny_qwen2) -> dict[str, str]:
    return {"tiny_llama": tiny_llama, "tiny_qwen2": tiny_qwen2}


@pytest.fixture(scope="module")
def interp_results(folders, tmp_path_factory) -> dict[str, dict]:
    """Every (model, scenario) run once, in one fresh interpreter-mode process."""
    work = tmp_path_factory.mktemp("triton_e2e")
    cases = [{"id": f"{m}/{s}", "folder": folders[m], "prompts": PROMPTS[s], "engine": ENGINE[s]} for m, s in CASES]
    (work / "spec.json").write_text(json.dumps({"new_tokens": NEW_TOKENS, "cases": cases}))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "TRITON_CACHE_DIR": str(work / "cache")}
    cmd = [sys.executable, "-m", "tests.helpers.triton_interp_e2e", str(work / "spec.json"), str(work / "out.json")]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        pytest.fail(f"the interpreter subprocess failed (rc {res.returncode}):\n{(res.stdout + res.stderr)[-4000:]}")
    return json.loads((work / "out.json").read_text())


@pytest.fixture(scope="module")
def hf_tokens(folders) -> dict[tuple[str, str], list[list[int]]]:
    return {(m, s): hf_greedy(folders[m], PROMPTS[s], NEW_TOKENS) for m, s in CASES}


def result_of(interp_results: dict[str, dict], model: str, scenario: str) -> dict:
    res = interp_results[f"{model}/{scenario}"]
    assert "error" not in res, f"{model}/{scenario} raised in the interpreter subprocess:\n{res.get('error')}"
    return res


@pytest.mark.parametrize(("model", "scenario"), CASES)
def test_every_attention_call_equals_torch_backend(interp_results, model, scenario):
    """Finer than the tokens: each layer of each step, the kernel's output and cache write vs the torch
    backend's on the same inputs."""
    res = result_of(interp_results, model, scenario)
    assert res["attention_calls"] == 2 * res["counts"]["steps"]  # 2 layers
    assert res["max_abs_diff_vs_torch"] < 1e-5, f"{model}/{scenario}: {res['max_abs_diff_vs_torch']:.2e}"
    assert res["cache_mismatches"] == 0


@pytest.mark.parametrize(("model", "scenario"), CASES)
def test_greedy_tokens_equal_hf(interp_results, hf_tokens, model, scenario):
    got = result_of(interp_results, model, scenario)["tokens"]
    want = hf_tokens[(model, scenario)]
    wrong = [
        f"request {i} ({len(PROMPTS[scenario][i])}-token prompt): HF {w}, triton interpreter {g}"
        for i, (w, g) in enumerate(zip(want, got))
        if w != g
    ]
    assert len(got) == len(want) and not wrong, f"{model}/{scenario}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("model", MODELS)
def test_chunked_prefix_mixed_schedule_happened(interp_results, model):
    """The schedule the tokens were checked under: what makes the scenario worth its interpreter time."""
    res = result_of(interp_results, model, "chunked_prefix_mixed")
    counts = res["counts"]
    assert res["num_cached_tokens"] == {"0": 0, "1": 32, "2": 8}  # twin: 4 of its 5 blocks
    assert max(res["step_tokens"]) == BUDGET  # the budget cut a chunk
    assert counts["max_prefill_chunk"] == THRESHOLD  # the threshold cut one
    assert counts["chunked_requests"] == 3  # every prompt took more than one step
    assert counts["mixed_steps"] > 0  # prompt chunks and decodes shared steps


@pytest.mark.parametrize("model", MODELS)
def test_tiny_pool_preempts_and_recomputes(interp_results, model):
    counts = result_of(interp_results, model, "tiny_pool_preempts")["counts"]
    assert counts["preemptions"] > 0
