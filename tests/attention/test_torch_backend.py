"""Torch backend vs the float64 oracle, invariances, the cache writer and backend selection."""

from __future__ import annotations

import pytest
import torch

from minivllm.attention import TorchAttentionBackend, build_attention_metadata, get_attn_backend, write_kv_cache
from minivllm.attention.torch_backend import TorchPlan

BACKEND = TorchAttentionBackend("0")  # the torch path itself (the C++ decode kernel: test_cpu_paged_decode.py)


def check(case, atol: float, rtol: float = 0.0) -> None:
    ref_out, ref_cache = case.reference()
    out, cache = case.run(BACKEND)
    assert out.dtype == case.q.dtype and out.shape == case.q.shape
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=rtol)
    torch.testing.assert_close(cache.double(), ref_cache, atol=0, rtol=0)


@pytest.mark.parametrize("block_size", [1, 16, 32])
@pytest.mark.parametrize("heads", [(9, 3), (4, 4), (8, 1)])
def test_mixed_batch_fp32_vs_reference(case_factory, mixed_factory, block_size, heads):
    seed = block_size * 100 + heads[0]
    check(case_factory(mixed_factory(seed, block_size), block_size, heads, seed=seed), atol=1e-5)


def test_head_dim_128(case_factory, mixed_factory):
    check(case_factory(mixed_factory(7, 16), 16, (8, 2), head_dim=128, seed=7), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_vs_reference(case_factory, mixed_factory, dtype):
    check(case_factory(mixed_factory(3, 16), 16, (9, 3), dtype=dtype, seed=3), atol=1.5e-2, rtol=1e-2)


def test_padding_tokens_are_skipped(case_factory):
    case = case_factory([(17, 1), (0, 5), (3, 4)], 16, pad=3, seed=11)
    assert case.meta.slot_mapping[-3:].tolist() == [-1, -1, -1]
    check(case, atol=1e-5)
    out, _ = case.run(BACKEND)
    assert torch.count_nonzero(out[case.meta.num_actual_tokens :]) == 0


def test_plan_kinds_and_slots_never_cover_padded_entries(case_factory):
    case = case_factory([(20, 1), (0, 7), (9, 4)], 16, junk=3)
    BACKEND.prepare(case.meta)
    plan = case.meta.plan
    assert isinstance(plan, TorchPlan)
    assert [rp.kind for rp in plan.requests] == ["decode", "causal", "chunk"]
    assert [rp.slots.numel() for rp in plan.requests] == [21, 7, 13]
    assert plan.requests[0].mask is None and plan.requests[1].mask is None
    assert plan.requests[2].mask.shape == (4, 13)
    # The decodes are attended together, padded to the longest one; here there is one.
    (dp,) = plan.decode
    assert dp.rows.tolist() == [0] and dp.max_len == 21 and dp.mask.all()
    # The plan is built once per step and reused by every layer.
    case.run(BACKEND)
    assert case.meta.plan is plan


def test_decodes_of_very_different_lengths_go_in_two_batches(case_factory):
    # Decodes of 10, 12, 200 and 210 tokens: one batch would pad all four to 210 (840 key rows),
    # two sorted batches need 2 x 12 + 2 x 210 = 444; similar lengths stay in one batch.
    case = case_factory([(9, 1), (199, 1), (11, 1), (209, 1), (0, 5)], 16)
    BACKEND.prepare(case.meta)
    groups = case.meta.plan.decode
    assert [g.rows.tolist() for g in groups] == [[0, 2], [1, 3]]
    assert [g.max_len for g in groups] == [12, 210]
    assert groups[0].mask[:, 0, 0].sum(-1).tolist() == [10, 12]
    out, _ = case.run(BACKEND)
    torch.testing.assert_close(out.double(), case.reference()[0], atol=1e-5, rtol=1e-5)
    similar = case_factory([(99, 1), (100, 1), (120, 1)], 16)
    BACKEND.prepare(similar.meta)
    assert len(similar.meta.plan.decode) == 1


def test_write_kv_cache_skips_minus_one():
    cache = torch.zeros(2, 3, 4, 2, 8)
    k, v = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    write_kv_cache(k, v, cache, torch.tensor([5, -1, 11]))
    assert torch.equal(cache[0, 1, 1], k[0]) and torch.equal(cache[1, 2, 3], v[2])
    assert torch.count_nonzero(cache) == 2 * 2 * 2 * 8


def _run_steps(q, k, v, cache, blocks, steps, block_size):
    """Run one request over consecutive steps of the given chunk sizes; return the concatenated output."""
    outs, done = [], 0
    for n in steps:
        meta = build_attention_metadata([done], [n], [blocks], block_size)
        outs.append(BACKEND.forward(q[done : done + n], k[done : done + n], v[done : done + n], cache, meta, 0.125))
        done += n
    return torch.cat(outs)


@pytest.mark.parametrize("steps", [[13, 16, 16], [1, 30, 14], [45]])
def test_chunked_prefill_equals_full_prefill(steps):
    torch.manual_seed(0)
    q, k, v = torch.randn(45, 9, 64), torch.randn(45, 3, 64), torch.randn(45, 3, 64)
    blocks = [5, 2, 7]
    full_cache, chunk_cache = torch.zeros(2, 8, 16, 3, 64), torch.zeros(2, 8, 16, 3, 64)
    full = _run_steps(q, k, v, full_cache, blocks, [45], 16)
    chunked = _run_steps(q, k, v, chunk_cache, blocks, steps, 16)
    torch.testing.assert_close(chunked, full, atol=1e-5, rtol=0)
    assert torch.equal(chunk_cache, full_cache)


def test_prefill_then_decodes_equal_full_causal_rows():
    torch.manual_seed(1)
    total = 26  # a 20-token prompt, then 6 decode steps (crossing the page boundary at 24)
    q, k, v = torch.randn(total, 4, 64), torch.randn(total, 1, 64), torch.randn(total, 1, 64)
    blocks = [3, 0]
    full = _run_steps(q, k, v, torch.zeros(2, 4, 12, 1, 64), blocks + [1], [total], 12)
    stepped = _run_steps(q, k, v, torch.zeros(2, 4, 12, 1, 64), blocks + [1], [20] + [1] * 6, 12)
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=0)


def test_request_output_unchanged_when_others_join(case_factory):
    alone = case_factory([(10, 7)], 16, seed=5)
    out_alone, _ = alone.run(BACKEND)
    torch.manual_seed(6)
    others = [(30, 1), (0, 9), (40, 12)]
    batch_reqs = [others[0], (10, 7), *others[1:]]
    blocks = alone.meta.block_table[0].tolist()[:2]
    num_blocks = alone.kv_cache.shape[1] + 10
    extra = list(range(alone.kv_cache.shape[1], num_blocks))
    table = [extra[0:2], blocks, extra[2:3], extra[3:7]]
    meta = build_attention_metadata([c for c, _ in batch_reqs], [n for _, n in batch_reqs], table, 16)
    cache = torch.cat([alone.kv_cache, torch.randn(2, 10, 16, 3, 64)], dim=1)
    n0 = 1
    q = torch.cat([torch.randn(n0, 9, 64), alone.q, torch.randn(21, 9, 64)])
    k = torch.cat([torch.randn(n0, 3, 64), alone.k, torch.randn(21, 3, 64)])
    v = torch.cat([torch.randn(n0, 3, 64), alone.v, torch.randn(21, 3, 64)])
    out = BACKEND.forward(q, k, v, cache, meta, alone.scale)
    torch.testing.assert_close(out[n0 : n0 + 7], out_alone, atol=1e-6, rtol=0)


# --- backend selection -------------------------------------------------------------------------------


def test_auto_on_cpu_is_torch(monkeypatch):
    monkeypatch.delenv("MINIVLLM_ATTENTION_BACKEND", raising=False)
    assert get_attn_backend("auto", torch.device("cpu"), torch.float32, 16, 64).name == "torch"
    assert get_attn_backend(None, "cpu", torch.bfloat16, 16, 64).name == "torch"


def test_env_var_overrides_auto_only(monkeypatch):
    monkeypatch.setenv("MINIVLLM_ATTENTION_BACKEND", "flash_attn")
    with pytest.raises(ValueError, match="'flash_attn' cannot be used"):
        get_attn_backend("auto", "cpu", torch.float16, 16, 64)
    assert get_attn_backend("torch", "cpu", torch.float16, 16, 64).name == "torch"
    monkeypatch.setenv("MINIVLLM_ATTENTION_BACKEND", "nope")
    with pytest.raises(ValueError, match="MINIVLLM_ATTENTION_BACKEND"):
        get_attn_backend(None, "cpu", torch.float16, 16, 64)


def test_unknown_name_lists_allowed():
    with pytest.raises(ValueError, match="unknown attention backend 'xformers'.*auto, torch, triton, flash_attn"):
        get_attn_backend("xformers", "cpu", torch.float32, 16, 64)


def test_triton_on_cpu_without_interpreter_raises(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="'triton' cannot be used: .*not CUDA.*TRITON_INTERPRET=1"):
        get_attn_backend("triton", "cpu", torch.float32, 16, 64)


def test_triton_rejects_dtype(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ValueError, match="'triton' cannot be used: dtype torch.float64"):
        get_attn_backend("triton", "cpu", torch.float64, 16, 64)


def test_flash_attn_reasons():
    with pytest.raises(ValueError, match="'flash_attn' cannot be used"):
        get_attn_backend("flash_attn", "cpu", torch.float16, 256, 64)
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="not importable"):
            get_attn_backend("flash_attn", "cpu", torch.float16, 256, 64)
        return
    with pytest.raises(ValueError, match="block_size 16 is not a multiple of 256"):
        get_attn_backend("flash_attn", "cuda", torch.float16, 16, 64)


def test_torch_rejects_integer_dtype():
    with pytest.raises(ValueError, match="'torch' cannot be used: dtype torch.int32"):
        get_attn_backend("torch", "cpu", torch.int32, 16, 64)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_torch_backend_on_cuda(case_factory, mixed_factory, dtype):
    tol = dict(atol=1e-4, rtol=0) if dtype == torch.float32 else dict(atol=1.5e-2, rtol=1e-2)
    case = case_factory(mixed_factory(21, 16, max_ctx=500), 16, (9, 3), dtype=dtype, device="cuda", seed=21, pad=2)
    check(case, **tol)
