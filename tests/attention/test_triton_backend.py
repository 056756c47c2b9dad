"""Triton unified kernel vs the float64 oracle: under TRITON_INTERPRET=1 on CPU, and on CUDA when present.

How the interpreter tests get interpreter mode: the backend JIT-wraps its kernels on first use, once per
mode, reading ``TRITON_INTERPRET`` then, so the ``interp`` fixture sets it with ``monkeypatch``. But
triton's own standard-library helpers (``tl.max``, ``tl.sum``) are wrapped when ``triton`` is first
imported: if that import happened in compiled mode (a CUDA process, or an earlier test), the interpreter
cannot call them. In that case the ``test_interpreter_*`` tests are skipped here and
``test_subprocess_interpreter_run`` (last in this file) reruns them in a fresh process that has
``TRITON_INTERPRET=1`` from the start; otherwise it runs one small fresh-process check.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minivllm.attention import build_attention_metadata, get_attn_backend
from minivllm.attention.triton_utils import triton_available

pytestmark = pytest.mark.skipif(not triton_available(), reason="the 'triton' package is not installed")

FP32 = dict(atol=1e-4, rtol=0)
HALF = dict(atol=1.5e-2, rtol=1e-2)
ROOT = Path(__file__).resolve().parents[2]


IN_CHILD = os.environ.get("MINIVLLM_TRITON_INTERP_CHILD") == "1"
_DEFERRED: list[str] = []  # interpreter tests skipped here, rerun by test_subprocess_interpreter_run


def _compiled_mode_process() -> str | None:
    """Why this process cannot run the interpreter, or None."""
    if IN_CHILD:
        return None
    if torch.cuda.is_available():
        return "a CUDA process keeps triton in compiled mode"
    if "triton.language" in sys.modules:
        from triton.language import standard

        if type(standard.max).__name__ != "InterpretedFunction":
            return "triton was already imported without TRITON_INTERPRET=1"
    return None


@pytest.fixture
def interp(monkeypatch, request):
    """The triton backend in interpreter mode (CPU tensors)."""
    if (why := _compiled_mode_process()) is not None:
        _DEFERRED.append(request.node.name)
        pytest.skip(f"{why}; rerun in a subprocess by test_subprocess_interpreter_run")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from minivllm.attention.triton_backend import _kernels

    assert all(type(k).__name__ == "InterpretedFunction" for k in _kernels())
    return get_attn_backend("triton", "cpu", torch.float32, 16, 64)


def check(case, backend, tol) -> None:
    ref_out, ref_cache = case.reference()
    out, cache = case.run(backend)
    assert out.dtype == case.q.dtype and out.shape == case.q.shape
    torch.testing.assert_close(out.double().cpu(), ref_out, **tol)
    torch.testing.assert_close(cache.double().cpu(), ref_cache, atol=0, rtol=0)


@pytest.mark.parametrize(("heads", "seed"), [((9, 3), 1), ((4, 4), 2), ((8, 1), 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_interpreter_mixed_batch(interp, case_factory, mixed_factory, heads, seed, dtype):
    case = case_factory(mixed_factory(seed, 16, max_ctx=40), 16, heads, dtype=dtype, seed=seed, pad=2)
    check(case, interp, FP32 if dtype == torch.float32 else HALF)


@pytest.mark.parametrize(("block_size", "head_dim"), [(4, 48), (32, 16)])
def test_interpreter_odd_page_and_head_dim(interp, case_factory, block_size, head_dim):
    case = case_factory([(9, 1), (0, 6), (block_size + 1, 5)], block_size, (6, 2), head_dim=head_dim, seed=4)
    check(case, interp, FP32)


def test_interpreter_bf16_upcasts(interp, case_factory):
    case = case_factory([(20, 1), (0, 7), (5, 4)], 16, (9, 3), dtype=torch.bfloat16, seed=8)
    check(case, interp, HALF)


def test_interpreter_chunked_equals_full(interp):
    torch.manual_seed(0)
    q, k, v = torch.randn(37, 9, 64), torch.randn(37, 3, 64), torch.randn(37, 3, 64)
    outs = {}
    for steps in ([37], [10, 16, 11]):
        cache, done, parts = torch.zeros(2, 5, 16, 3, 64), 0, []
        for n in steps:
            meta = build_attention_metadata([done], [n], [[4, 1, 3]], 16)
            parts.append(interp.forward(q[done : done + n], k[done : done + n], v[done : done + n], cache, meta, 0.125))
            done += n
        outs[len(steps)] = torch.cat(parts)
    torch.testing.assert_close(outs[3], outs[1], atol=1e-5, rtol=0)


def test_interpreter_write_kernel_matches_torch_writer(interp):
    from minivllm.attention.backend import write_kv_cache
    from minivllm.attention.triton_backend import triton_write_kv_cache

    k, v = torch.randn(5, 3, 40), torch.randn(5, 3, 40)
    slots = torch.tensor([7, -1, 0, 33, -1])
    a, b = torch.zeros(2, 3, 16, 3, 40), torch.zeros(2, 3, 16, 3, 40)
    write_kv_cache(k, v, a, slots)
    triton_write_kv_cache(k, v, b, slots)
    assert torch.equal(a, b) and torch.count_nonzero(b) == 2 * 3 * 3 * 40


NO_NVIDIA_BACKEND = 3  # sm90_compile.py's exit code when triton has no NVIDIA backend


def _fresh_process(cmd: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a new interpreter: compiled mode, an empty triton cache of its own."""
    base = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cache = str(tmp_path / "triton-cache")
    # TRITON_DEFAULT_FP_FUSION silences triton 3.9's default-change warning.
    env = {**base, "TRITON_CACHE_DIR": cache, "PYTHONPATH": str(ROOT), "TRITON_DEFAULT_FP_FUSION": "1", **env}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("dtype", "group", "head_dim"), [("fp16", 3, 64), ("fp32", 1, 80)])
def test_kernels_compile_for_hopper_without_gpu(tmp_path, dtype, group, head_dim):
    """The compiled (non-interpreter) path: lower both kernels to sm_90 machine code; no GPU needed.

    In a fresh process with an empty cache, so it compiles for real whatever ran before it in this one
    (the interpreter leaves triton.language patched) and whatever an earlier run left in ~/.triton."""
    res = _fresh_process(
        [sys.executable, str(ROOT / "tests/attention/sm90_compile.py"), dtype, str(group), str(head_dim)], tmp_path
    )
    if res.returncode == NO_NVIDIA_BACKEND:
        pytest.skip(res.stderr.strip().splitlines()[-1])
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    lines = res.stdout.split("\n")
    for kernel in ("_unified_attention_kernel", "_write_kv_kernel"):
        size = next(int(line.split()[-2]) for line in lines if line.startswith(kernel + ":"))
        assert size > 1000, res.stdout
    assert any((tmp_path / "triton-cache").rglob("*.cubin")), "nothing was compiled into the empty cache"


def test_compiling_after_the_interpreter_fails_with_a_clear_error(tmp_path):
    """The order dependence itself: interpreter first, then compiled mode, in one process."""
    script = (
        "import os, torch\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "from tests.helpers.attention import make_case\n"
        "from minivllm.attention import get_attn_backend\n"
        "from minivllm.attention.triton_backend import _kernels, interpreter_patched_language\n"
        "assert not interpreter_patched_language()\n"
        "backend = get_attn_backend('triton', 'cpu', torch.float32, 16, 64)\n"
        "make_case([(17, 1), (0, 9)], 16, (9, 3), seed=3).run(backend)\n"
        "assert interpreter_patched_language()\n"
        "del os.environ['TRITON_INTERPRET']\n"
        "try:\n"
        "    _kernels()\n"
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n"
    )
    res = _fresh_process([sys.executable, "-c", script], tmp_path)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "refused: the Triton interpreter (TRITON_INTERPRET=1) already ran in this process" in res.stdout


# --- CUDA (run on a GPU machine) ---------------------------------------------------------------------


def _large_batch(seed: int, block_size: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    reqs = [(rng.randint(1, 3000), 1) for _ in range(16)]  # decodes
    reqs += [(1000, 300), (rng.randint(1, 2000), 77), (0, 512), (0, 1), (2 * block_size - 1, 1), (block_size, 1)]
    rng.shuffle(reqs)
    return reqs


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("heads", "head_dim"), [((9, 3), 64), ((32, 8), 128)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_triton_vs_torch_vs_reference(monkeypatch, case_factory, heads, head_dim, dtype):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    tol = FP32 if dtype == torch.float32 else HALF
    case = case_factory(_large_batch(5, 16), 16, heads, head_dim, dtype=dtype, device="cuda", seed=5, pad=3)
    triton_backend = get_attn_backend("triton", "cuda", dtype, 16, head_dim)
    assert triton_backend.name == "triton"
    check(case, triton_backend, tol)
    out_triton, _ = case.run(triton_backend)
    out_torch, _ = case.run(get_attn_backend("torch", "cuda", dtype, 16, head_dim))
    torch.testing.assert_close(out_triton.float(), out_torch.float(), **tol)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_auto_picks_triton(monkeypatch):
    monkeypatch.delenv("MINIVLLM_ATTENTION_BACKEND", raising=False)
    assert get_attn_backend("auto", "cuda", torch.bfloat16, 16, 64).name == "triton"


@pytest.mark.skipif(IN_CHILD, reason="already inside the interpreter subprocess")
def test_subprocess_interpreter_run():
    """Fresh process, TRITON_INTERPRET=1 before any import: the deferred interpreter tests, or a small case."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "MINIVLLM_TRITON_INTERP_CHILD": "1", "PYTHONPATH": str(ROOT)}
    if _DEFERRED:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "test_interpreter_"]
    else:
        script = (
            "import torch\n"
            "from tests.helpers.attention import make_case\n"
            "from minivllm.attention import get_attn_backend\n"
            "case = make_case([(17, 1), (0, 9), (3, 6)], 16, (9, 3), seed=12, pad=1)\n"
            "out, _ = case.run(get_attn_backend('triton', 'cpu', torch.float32, 16, 64))\n"
            "assert (out.double() - case.reference()[0]).abs().max().item() < 1e-4\n"
        )
        cmd = [sys.executable, "-c", script]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
