"""Whether this CPU does bf16 arithmetic in hardware (``dtype="bfloat16"`` on a CPU; §11.9 where the time goes).

vLLM's CPU backend runs bf16 models (``LLM(model, dtype="bfloat16")``) and is fast at it on CPUs with
AVX512_BF16 or AMX (its CPU installation guide recommends them). PyTorch runs bf16 on any CPU, converting to fp32
where the hardware lacks bf16 instructions: the numbers are the same kind, only slower, often slower than fp32.
So minivllm takes ``dtype="bfloat16"`` on every CPU and logs one warning where ``/proc/cpuinfo`` (Linux) shows
neither flag; fp32 stays the CPU default (``dtype="auto"``), the dtype whose greedy tokens equal HF's.
"""

from __future__ import annotations

import functools
import logging
import platform

import torch

logger = logging.getLogger(__name__)

BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 (AVX512_BF16, AMX), Arm (FEAT_BF16)


@functools.cache
def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux); None where that file does not exist."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return frozenset()


def native_bf16(flags: frozenset[str] | None) -> bool | None:
    """True/False when the flags say whether bf16 arithmetic is in hardware; None when they are unknown."""
    return None if flags is None else any(f in flags for f in BF16_FLAGS)


@functools.cache
def check_cpu_dtype(dtype: torch.dtype, device_type: str) -> str | None:
    """The warning for bf16 on a CPU without AVX512_BF16/AMX (logged once per process), else None."""
    if dtype != torch.bfloat16 or device_type != "cpu" or native_bf16(cpu_flags()) is not False:
        return None
    message = (
        f"dtype=bfloat16 on a CPU ({platform.machine()}) without avx512_bf16 or amx_bf16 in /proc/cpuinfo: it runs, "
        "but PyTorch emulates bf16 here and it is usually slower than dtype=float32 (the CPU default)."
    )
    logger.warning(message)
    return message
