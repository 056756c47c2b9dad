"""Lower both Triton kernels to sm_90 (Hopper) machine code, no GPU needed; run in a fresh process.

``python tests/attention/sm90_compile.py fp16 3 64`` (dtype, query heads per KV head, head_dim) compiles
the attention kernel and the KV-write kernel with triton's NVIDIA backend for ``GPUTarget("cuda", 90, 32)``
and prints one line per kernel with the size of its cubin. It exits non-zero if either fails (3: triton
has no NVIDIA backend, which the test reports as a skip).

Why a fresh process: once the Triton interpreter has run in a process it leaves ``triton.language``
patched (see ``minivllm.attention.triton_backend.interpreter_patched_language``), and compiling there
fails; a cubin already in ``TRITON_CACHE_DIR`` would hide that, which is why the test gives this script
an empty cache of its own.
"""

from __future__ import annotations

import os
import sys


def compile_sm90(dtype: str, group: int, head_dim: int) -> dict[str, int]:
    """Compile both kernels for sm_90; return {kernel name: cubin bytes}."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise SystemExit("run without TRITON_INTERPRET: this checks the compiled path")
    import triton
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource

    from minivllm.attention.triton_backend import _kernels, _pow2

    if "nvidia" not in backends:
        print(f"triton {triton.__version__} has no NVIDIA backend here", file=sys.stderr)
        raise SystemExit(3)  # the test skips on this code
    attn, write = _kernels()
    rows = _pow2(group, 16)
    attn_consts = dict(
        GROUP=group,
        QB=rows // group,
        ROWS=rows,
        HEAD_DIM=head_dim,
        PAGE=16,
        TILE=32,
        D_PAD=_pow2(head_dim, 16),
        FP32_DOT=dtype == "fp32",
        UPCAST=False,
    )
    write_consts = dict(NUM_KV_HEADS=3, HEAD_DIM=head_dim, H_PAD=4, D_PAD=_pow2(head_dim), PAGE=16)
    attn_types = [f"*{dtype}"] * 4 + ["*i32"] * 3 + ["fp32"] + ["i32"] * 9
    write_types = [f"*{dtype}"] * 4 + ["*i64"] + ["i32"] * 7
    sizes = {}
    for kernel, types, consts in ((attn, attn_types, attn_consts), (write, write_types, write_consts)):
        sig = {**dict(zip(kernel.arg_names, types)), **{name: "constexpr" for name in consts}}
        compiled = triton.compile(ASTSource(kernel, sig, consts), target=GPUTarget("cuda", 90, 32))
        sizes[kernel.__name__] = len(compiled.asm["cubin"])
    return sizes


if __name__ == "__main__":
    dtype, group, head_dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for name, size in compile_sm90(dtype, group, head_dim).items():
        print(f"{name}: sm_90 cubin {size} bytes")
