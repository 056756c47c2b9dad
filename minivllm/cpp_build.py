"""Building minivllm's optional C++ CPU kernels at first use, and the switch that chooses them (§11.7, decode steps).

Two small extensions serve a CPU decode step: the paged decode attention with vLLM's ``reshape_and_cache``
(:mod:`minivllm.attention.cpu_decode_kernel`) and the decode-sized linear layer
(:mod:`minivllm.model.cpu_decode_gemm`). vLLM compiles its ``csrc/cpu`` kernels when the wheel is built; minivllm
compiles each with :func:`torch.utils.cpp_extension.load_inline` the first time it is needed (a C++ compiler and
``ninja``, which requirements.txt installs; only ATen headers, no pybind11) and torch caches the build in its
extension directory (``TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``): ~10-15 s of CPU once per
fresh home directory, ~0.1 s to load in a later process.

``MINIVLLM_CPU_DECODE_KERNEL`` chooses for both: ``auto`` (unset) uses a kernel on Linux when it builds and otherwise
logs one line and keeps the torch path (macOS and Windows compilers want other OpenMP and attribute spellings, so
``auto`` keeps the torch path there without trying); ``1`` requires it (an error if it cannot be built); ``0``
never builds it (the torch path, which is also each kernel's test oracle).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator

logger = logging.getLogger(__name__)

ENV_VAR = "MINIVLLM_CPU_DECODE_KERNEL"
ENV_VALUES = ("auto", "0", "1")


def kernel_mode(value: str | None = None) -> str:
    """``value`` (None: ``MINIVLLM_CPU_DECODE_KERNEL``, unset = auto) as ``auto``/``0``/``1``; else ValueError."""
    source = "decode_kernel" if value is not None else ENV_VAR
    mode = (os.environ.get(ENV_VAR, "") if value is None else value).strip().lower() or "auto"
    if mode not in ENV_VALUES:
        raise ValueError(f"{source} must be one of {', '.join(ENV_VALUES)} (unset = auto), got {mode!r}.")
    return mode


def compile_inline(name: str, source: str, cflags: tuple[str, ...] = ("-O3", "-fopenmp", "-ffp-contract=off")) -> None:
    """Compile (or load torch's cached build of) the C++ ``source`` as extension ``name``; it registers its own
    ``torch.ops`` (``TORCH_LIBRARY``). Raises what the build raises. FMA contraction is off unless a function asks
    for it (its sums then have the same bits at every vector width the CPU may pick)."""
    from torch.utils import cpp_extension

    path = os.environ.get("PATH", "")
    if shutil.which("ninja") is None:  # pip's ninja in a venv that is not activated: its scripts folder
        os.environ["PATH"] = os.pathsep.join([_pip_ninja_dir(), os.path.dirname(sys.executable), path])
    try:
        build_dir = cpp_extension._get_build_directory(name, verbose=False)  # where load_inline builds and locks
        with _one_builder(build_dir):
            cpp_extension.load_inline(  # type: ignore[no-untyped-call]
                name=name,
                cpp_sources=source,
                extra_cflags=list(cflags),
                extra_ldflags=["-fopenmp"],
                is_python_module=False,  # the source registers torch.ops.<library>.<op>
                no_implicit_headers=True,  # not <torch/extension.h> (pybind11): a build of ~5 s of CPU instead of ~35
                verbose=False,
            )
    finally:
        os.environ["PATH"] = path


@contextlib.contextmanager
def _one_builder(build_dir: str) -> Iterator[None]:
    """Let one minivllm process at a time build or load in ``build_dir``, and clear a dead build's lock first.

    torch marks a build in progress with a ``lock`` file there and waits, forever, for it to go away; a build
    killed part-way (a notebook kernel restarted during the first ~15 s build) leaves it behind, and every later
    engine would hang at start. Around torch's, minivllm holds an ``flock`` on ``minivllm.flock``, which the
    operating system releases when its process dies: once it is held, no live minivllm process is building
    there, so a ``lock`` file left is stale and is removed.
    """
    try:
        import fcntl
    except ImportError:  # not a POSIX system (the kernels are built in "auto" mode on Linux only)
        yield
        return
    os.makedirs(build_dir, exist_ok=True)
    with open(os.path.join(build_dir, "minivllm.flock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # waits while another process builds; closing the file releases it
        baton = os.path.join(build_dir, "lock")
        if os.path.exists(baton):
            logger.warning("Removing %s, left by a build of %s that was stopped part-way.", baton, build_dir)
            os.remove(baton)
        yield


def _pip_ninja_dir() -> str:
    """Where the ``ninja`` package put its binary ("" without the package)."""
    try:
        return str(getattr(importlib.import_module("ninja"), "BIN_DIR", ""))
    except ImportError:
        return ""
