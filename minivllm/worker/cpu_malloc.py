"""Keep freed activation memory inside the process on a CPU (§11.9, where the CPU time goes).

A 2,048-token prefill step of SmolLM2 allocates and frees about 3 GB of activations (every layer's
q/k/v, MLP and residual tensors, tens of MB each). glibc's ``malloc`` serves blocks that large with
``mmap`` and hands them back to the kernel on ``free``, so the next layer's tensor page-faults all
its memory in again (the README's "Speed on a CPU" gives what that costs). vLLM's CPU guide fixes the
same thing by preloading tcmalloc (``LD_PRELOAD``); minivllm sets glibc's own knobs instead
(``mallopt``): blocks up to 64 MiB come from the heap, and up to 1 GiB of free heap is kept rather
than trimmed. The process keeps its peak memory, as any server does.

Process-wide and set once, like ``torch.set_num_threads``; nothing to do on non-glibc systems.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import platform

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # from glibc's <malloc.h>
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3


@functools.cache
def keep_freed_memory() -> bool:
    """Tune glibc malloc for big, short-lived tensors; return True if it was applied."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    # mallopt returns 1 on success; older glibc caps the mmap threshold at 32 MiB.
    ok = libc.mallopt(M_MMAP_THRESHOLD, 64 << 20) == 1 or libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1
    ok = ok and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 and libc.mallopt(M_TOP_PAD, 64 << 20) == 1
    logger.debug("glibc malloc tuned for large tensors: %s", ok)
    return bool(ok)
