"""The whole engine through FlashAttnBackend's ``flash_attn_varlen_func`` call, on CPU, with a stand-in
``flash_attn`` (tests/helpers/flash_attn_standin.py): greedy tokens equal HF ``generate`` (§11.3-§11.6).

No flash-attn wheel runs here, so this checks the backend's side of the contract: that every step of real
schedules (chunks, mixed prefill+decode steps, prefix hits, a preemption) reaches the kernel as arguments
upstream flash-attn 2.x accepts (checked by the stand-in as its CUDA code would) and that those arguments
mean the right attention (the stand-in computes it with the float64 oracle from the paged cache).

How: the selector refuses flash_attn on CPU/fp32 (rightly), so the engine is built with
``attention_backend="torch"`` and its runner's backend is then replaced by ``FlashAttnBackend()``
(``engine.model_runner.attn_backend``, tests/helpers/engine_runs.py), wrapped so that each call's
output is also compared with the torch backend's (tests/helpers/cross_checked_backend.py). The stand-in
accepts fp32 here (the real kernel: fp16/bf16 only) so the tokens can be compared exactly. Page size 256,
as upstream requires; the tiny models get ``max_position_embeddings=1024`` so prompts can span more than one page.
"""

from __future__ import annotations

import sys

import pytest
import torch

from minivllm.attention import get_attn_backend
from minivllm.attention.flash_attn_backend import FlashAttnBackend
from minivllm.model.loader import load_model
from tests.helpers.attention import make_case
from tests.helpers.cross_checked_backend import CrossCheckedBackend
from tests.helpers.engine_runs import TraceCounts, run_engine
from tests.helpers.flash_attn_standin import FlashAttnArgError, FlashAttnStandIn
from tests.helpers.hf_reference import hf_greedy, make_prompts
from tests.helpers.tiny_models import save_tiny_model

NEW_TOKENS = 12
PAGE = 256
BUDGET, THRESHOLD = 64, 48

_TWIN, _SHARED, _SHORT = make_prompts(320, [PAGE, 20, 10], shared=PAGE, seed=3)  # 512, 276, 10 tokens
_SHORT = _SHORT[PAGE:]  # 10 tokens, nothing shared
ARRIVALS = [0, 5, 11, 14]
PROMPTS = {
    # 0 at step 0 (11 chunks). 1, sharing 0's first page, at step 5: the step whose chunk completes that
    # page; 1 is given it and reads it after the step's K/V write. 0's twin at step 11, both its pages
    # cached: it is given 1 (the last-token rule) and recomputes the other. 3 at step 14, among decodes.
    "chunked_prefix_mixed": [_TWIN, _SHARED, _TWIN, _SHORT],
    "tiny_pool_preempts": make_prompts(320, [250, 240], seed=4),
}
ENGINE = {
    "chunked_prefix_mixed": dict(
        max_num_batched_tokens=BUDGET, long_prefill_token_threshold=THRESHOLD, arrivals=ARRIVALS
    ),
    # 2 usable pages: request 0 needs a second page at token 257 and pushes request 1 out.
    "tiny_pool_preempts": dict(num_gpu_blocks=3, max_model_len=512, max_num_batched_tokens=512),
}


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"tiny_{request.param}_1k")
    folder = save_tiny_model(str(tmp), request.param, max_position_embeddings=1024)
    return load_model(folder), {name: hf_greedy(folder, p, NEW_TOKENS) for name, p in PROMPTS.items()}


@pytest.fixture
def standin(monkeypatch):
    """``import flash_attn`` finds the stand-in (fp32 allowed) for this test only."""
    fake = FlashAttnStandIn(dtypes=(torch.float32,))
    monkeypatch.setitem(sys.modules, "flash_attn", fake.module)
    return fake


def run(loaded, scenario):
    kwargs = {"block_size": PAGE, "num_gpu_blocks": 10, "max_model_len": 1024, **ENGINE[scenario]}
    backend = CrossCheckedBackend(FlashAttnBackend())
    got, trace = run_engine(
        loaded, PROMPTS[scenario], NEW_TOKENS, attention_backend="torch", attn_backend=backend, **kwargs
    )
    # Every layer of every step, before the tokens: the flash_attn path's output is the torch backend's.
    assert backend.max_abs_diff < 1e-5, f"{scenario}: flash_attn path vs torch backend: {backend.max_abs_diff:.2e}"
    assert backend.cache_mismatches == 0
    return got, trace


def check_tokens(standin, got, want, scenario):
    assert standin.rejected == [], f"{scenario}: the stand-in refused a call: {standin.rejected[0]}"
    wrong = [f"request {i}: HF {w}, flash_attn stand-in {g}" for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert len(got) == len(want) and not wrong, f"{scenario}:\n" + "\n".join(wrong)


def test_chunked_prefix_mixed_equals_hf(model, standin):
    loaded, expected = model
    got, trace = run(loaded, "chunked_prefix_mixed")
    check_tokens(standin, got, expected["chunked_prefix_mixed"], "chunked_prefix_mixed")
    counts = TraceCounts.of(trace)
    assert {r: rec.num_cached_tokens for r, rec in trace.requests.items()} == {"0": 0, "1": PAGE, "2": PAGE, "3": 0}
    assert counts.max_prefill_chunk == THRESHOLD and max(s.num_scheduled_tokens for s in trace.steps) == BUDGET
    assert counts.mixed_steps > 0
    # Every layer of every step went through flash_attn_varlen_func, with the model's scale.
    assert len(standin.calls) == loaded.arch.num_layers * counts.steps
    assert {c.softmax_scale for c in standin.calls} == {loaded.arch.head_dim**-0.5}
    assert {c.page_size for c in standin.calls} == {PAGE}
    assert any(1 in c.query_lens and max(c.query_lens) > 1 for c in standin.calls)  # decode + prompt in one call
    assert any(k > PAGE and q > 1 for c in standin.calls for q, k in zip(c.query_lens, c.kv_lens))  # chunk past a page


def test_preemption_and_recompute_equals_hf(model, standin):
    loaded, expected = model
    got, trace = run(loaded, "tiny_pool_preempts")
    check_tokens(standin, got, expected["tiny_pool_preempts"], "tiny_pool_preempts")
    assert TraceCounts.of(trace).preemptions > 0
    assert len(standin.calls) == loaded.arch.num_layers * len(trace.steps)


# --- the stand-in's checks can fail -------------------------------------------------------------------


@pytest.fixture
def sent(standin, monkeypatch):
    """The keyword arguments FlashAttnBackend sends for one mixed batch (recorded from a real call)."""
    case = make_case([(300, 1), (0, 40), (PAGE, 9), (2 * PAGE - 1, 1)], PAGE, (4, 2), 16, seed=5, pad=2)
    args = {}

    def recording(**kwargs):
        args.update(kwargs)
        return standin.flash_attn_varlen_func(**kwargs)

    monkeypatch.setattr(standin.module, "flash_attn_varlen_func", recording)
    out, _ = case.run(FlashAttnBackend())
    torch.testing.assert_close(out.double(), case.reference()[0], atol=1e-5, rtol=0)  # the valid call works
    assert standin.calls[0].kv_lens == [301, 40, PAGE + 9, 2 * PAGE]
    return args


MUTATIONS = {
    "page size 16": (lambda a: dict(k=a["k"][:, :16].contiguous(), v=a["v"][:, :16].contiguous()), "divisible by 256"),
    "int64 cu_seqlens_k": (lambda a: dict(cu_seqlens_k=a["cu_seqlens_k"].long()), "cu_seqlens_k must have dtype"),
    "int64 block_table": (lambda a: dict(block_table=a["block_table"].long()), "block_table must have dtype"),
    "cu_seqlens_q short": (lambda a: dict(q=a["q"][:-1]), "but q has"),
    "max_seqlen_q too small": (lambda a: dict(max_seqlen_q=a["max_seqlen_q"] - 1), "max_seqlen_q"),
    "seq_lens as cu_seqlens_k": (lambda a: dict(cu_seqlens_k=torch.diff(a["cu_seqlens_k"])), "shape"),
    "block id past the cache": (lambda a: dict(block_table=a["block_table"] + a["k"].shape[0]), "block ids outside"),
    "not causal": (lambda a: dict(causal=False), "causal=True"),
    "no softmax_scale": (lambda a: dict(softmax_scale=None), "softmax_scale"),
    "fp16 k": (lambda a: dict(k=a["k"].half()), "differ from q"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_standin_rejects_what_the_kernel_would(sent, name):
    change, message = MUTATIONS[name]
    fake = FlashAttnStandIn(dtypes=(torch.float32,))
    with pytest.raises(FlashAttnArgError, match=message):
        fake.flash_attn_varlen_func(**{**sent, **change(sent)})
    assert fake.calls == []


def test_standin_default_refuses_fp32(sent):
    """The real kernel's dtype rule is the default: fp16/bf16 only."""
    with pytest.raises(FlashAttnArgError, match="not one of"):
        FlashAttnStandIn().flash_attn_varlen_func(**sent)


def test_standin_output_follows_cu_seqlens_k(sent):
    """Accepted but wrong (each request's KV cut to its own queries): the oracle computes what was asked."""
    fake = FlashAttnStandIn(dtypes=(torch.float32,))
    right = fake.flash_attn_varlen_func(**sent)
    cut = fake.flash_attn_varlen_func(**{**sent, "cu_seqlens_k": sent["cu_seqlens_q"]})
    assert fake.calls[1].kv_lens == fake.calls[1].query_lens
    assert not torch.allclose(right, cut)


def test_selector_still_refuses_flash_attn_on_cpu(standin):
    """Why the engine tests replace the runner's backend: with flash_attn importable, CPU/fp32 is refused."""
    with pytest.raises(ValueError, match="device is 'cpu'; flash_attn needs CUDA"):
        get_attn_backend("flash_attn", "cpu", torch.float32, PAGE, 16)
