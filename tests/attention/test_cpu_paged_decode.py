"""The C++ paged decode kernel (attention/cpu_decode_kernel.py) against its oracle, the torch path, and the float64
reference: ragged lengths over several pages, GQA, fp32/bf16/fp16, padding rows, a strided block table, thread
counts; and its switch (MINIVLLM_CPU_DECODE_KERNEL) and fallback. Skipped where the kernel cannot be built (no C++
compiler, headers or ninja). Tolerances are fp32 rounding (the kernel sums in another order than SDPA), never bits.
"""

from __future__ import annotations

import logging

import pytest
import torch

from minivllm.attention import cpu_decode_kernel
from minivllm.attention.torch_backend import TorchAttentionBackend, TorchPlan
from tests.helpers.attention import make_case, mixed_requests

KERNEL = TorchAttentionBackend("1")
TORCH = TorchAttentionBackend("0")


@pytest.fixture(scope="module", autouse=True)
def built():
    if cpu_decode_kernel.get_paged_decode("auto") is None:
        pytest.skip("the CPU decode kernel cannot be built here (see the warning logged above)")


def ragged_decodes(seed: int, num: int, block_size: int, max_ctx: int = 150) -> list[tuple[int, int]]:
    g = torch.Generator().manual_seed(seed)
    return [(c, 1) for c in torch.randint(0, max_ctx, (num,), generator=g).tolist()]


def run_both(case):
    """(kernel output, torch-path output, float64 reference); each backend plans the step itself."""
    case.meta.plan = None
    out_k, cache_k = case.run(KERNEL)
    assert isinstance(case.meta.plan, TorchPlan) and case.meta.plan.kernel is not None  # the kernel attended
    case.meta.plan = None
    out_t, cache_t = case.run(TORCH)
    assert torch.equal(cache_k, cache_t)
    return out_k, out_t, case.reference()[0]


@pytest.mark.parametrize("block_size", [1, 16, 32])
@pytest.mark.parametrize("heads", [(9, 3), (4, 4), (8, 1)])
def test_fp32_decodes_match_torch_path_and_reference(block_size, heads):
    seed = block_size + heads[0]
    reqs = ragged_decodes(seed, 11, block_size) + [(2 * block_size - 1, 1), (0, 1)]  # a page boundary, L = 1
    case = make_case(reqs, block_size, heads, seed=seed)
    out_k, out_t, ref = run_both(case)
    torch.testing.assert_close(out_k, out_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_k.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_mixed_step_kernel_decodes_and_sdpa_prompts(seed):
    case = make_case(mixed_requests(seed, 16) + ragged_decodes(seed, 5, 16), 16, (9, 3), pad=2, seed=seed)
    out_k, out_t, ref = run_both(case)
    torch.testing.assert_close(out_k, out_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_k.double(), ref, rtol=1e-5, atol=1e-5)
    assert torch.count_nonzero(out_k[case.meta.num_actual_tokens :]) == 0  # padding rows


def test_head_dim_128_long_contexts():
    case = make_case(ragged_decodes(5, 6, 16, max_ctx=700), 16, (8, 2), head_dim=128, seed=5)
    out_k, out_t, ref = run_both(case)
    torch.testing.assert_close(out_k, out_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_k.double(), ref, rtol=1e-5, atol=1e-5)


def test_peaked_and_flat_softmaxes():
    # Scores hundreds apart (the kernel's exp holds values below e^-87 there) and scores all ~0 (every weight ~1).
    # Scores of ~500 carry fp32 rounding of ~3e-5 before any exp, in SDPA too: against float64, a wider tolerance.
    for factor, tol in ((60.0, 1e-4), (1e-3, 1e-5)):
        case = make_case(ragged_decodes(7, 6, 16, max_ctx=400), 16, (9, 3), seed=7)
        case.q.mul_(factor)
        out_k, out_t, ref = run_both(case)
        torch.testing.assert_close(out_k, out_t, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out_k.double(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_caches(dtype):
    case = make_case(ragged_decodes(3, 9, 16), 16, (9, 3), dtype=dtype, seed=3)
    out_k, out_t, ref = run_both(case)
    assert out_k.dtype == dtype
    torch.testing.assert_close(out_k.double(), ref, atol=1.5e-2, rtol=1e-2)  # as the torch path's own test
    torch.testing.assert_close(out_k.double(), out_t.double(), atol=1.5e-2, rtol=1e-2)


def test_pure_decode_step_plans_no_gather_and_reuses_the_plan():
    case = make_case(ragged_decodes(9, 4, 16), 16, seed=9)
    KERNEL.prepare(case.meta)
    plan = case.meta.plan
    assert isinstance(plan, TorchPlan) and plan.requests == [] and plan.decode == [] and plan.kernel is not None
    assert plan.kernel.rows.tolist() == [0, 1, 2, 3] and plan.kernel.reqs.tolist() == [0, 1, 2, 3]
    case.run(KERNEL)
    assert case.meta.plan is plan


def test_strided_block_table_and_thread_counts_give_the_same_bits():
    case = make_case(ragged_decodes(4, 8, 16), 16, seed=4)
    wide = torch.zeros(case.meta.num_reqs, case.meta.block_table.shape[1] + 5, dtype=torch.int32)
    wide[:, : case.meta.block_table.shape[1]] = case.meta.block_table
    case.meta.block_table = wide[:, : case.meta.block_table.shape[1]]  # a view, row stride != row length
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        case.meta.plan = None
        one, _ = case.run(KERNEL)
        torch.set_num_threads(max(2, threads))
        case.meta.plan = None
        many, _ = case.run(KERNEL)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)  # one request is always summed by one thread, in one order
    torch.testing.assert_close(one.double(), case.reference()[0], rtol=1e-5, atol=1e-5)


def test_unsupported_head_size_or_dtype_falls_back_to_the_torch_path():
    for kwargs in ({"head_dim": 8}, {"dtype": torch.float64}):
        case = make_case(ragged_decodes(2, 3, 4), 4, (4, 2), seed=2, **kwargs)
        out, _ = case.run(KERNEL)
        assert isinstance(case.meta.plan, TorchPlan) and case.meta.plan.kernel is None and case.meta.plan.decode
        torch.testing.assert_close(out.double(), case.reference()[0], rtol=1e-5, atol=1e-5)


def test_switch_values(monkeypatch):
    monkeypatch.setenv(cpu_decode_kernel.ENV_VAR, "0")
    assert TorchAttentionBackend().decode_kernel == "0"
    case = make_case(ragged_decodes(1, 3, 16), 16, seed=1)
    TorchAttentionBackend().prepare(case.meta)
    assert case.meta.plan.kernel is None
    monkeypatch.setenv(cpu_decode_kernel.ENV_VAR, "yes")
    with pytest.raises(ValueError, match=cpu_decode_kernel.ENV_VAR):
        TorchAttentionBackend()
    with pytest.raises(ValueError, match="decode_kernel"):
        TorchAttentionBackend("on")


def test_a_failed_build_logs_once_and_keeps_the_torch_path(monkeypatch, caplog):
    def broken():
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(cpu_decode_kernel, "_build", broken)
    cpu_decode_kernel._load_or_none.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=cpu_decode_kernel.__name__):
            backend = TorchAttentionBackend("auto")
            case = make_case(ragged_decodes(6, 3, 16), 16, seed=6)
            for _ in range(3):
                case.meta.plan = None
                out, _ = case.run(backend)
            assert case.meta.plan.kernel is None
            torch.testing.assert_close(out.double(), case.reference()[0], rtol=1e-5, atol=1e-5)
        assert [r.message.count("no compiler here") for r in caplog.records] == [1]
        case.meta.plan = None
        with pytest.raises(RuntimeError, match="MINIVLLM_CPU_DECODE_KERNEL=1"):
            TorchAttentionBackend("1").forward(case.q, case.k, case.v, case.kv_cache.clone(), case.meta, case.scale)
    finally:
        cpu_decode_kernel._load_or_none.cache_clear()
