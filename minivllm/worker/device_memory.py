"""How many bytes the KV cache may take on a GPU, measured after a warm-up (ch. 4; §11.7).

Mirrors ``Worker.determine_available_memory`` in ``vllm/v1/worker/gpu_worker.py`` (v0.8.5): empty
PyTorch's cache and reset its peak counter, run one forward over a full token budget on throw-away
inputs (the *profiling run*, ``ModelRunner.profile_run``), then

    KV budget = total memory x gpu_memory_utilization - torch's peak - memory torch did not allocate

"Memory torch did not allocate" is the CUDA context, NCCL, and other processes on the same GPU:
device memory in use (``total - free``, read after emptying the cache again) minus what torch holds.
The peak includes the weights and the activation peak of the largest step, so a larger
``max_num_batched_tokens`` leaves fewer KV blocks.

``DeviceMemory`` is the handful of ``torch.cuda`` calls this needs. ``CudaMemory`` makes them on a real
device; a test can give the runner a stand-in (``ModelRunner.device_memory``) so the CUDA branch of the
sizing runs, with a real profiling forward, on a CPU machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch


class DeviceMemory(Protocol):
    """The memory calls of one accelerator (``torch.cuda``'s names, minus the device argument)."""

    def empty_cache(self) -> None: ...

    def reset_peak_memory_stats(self) -> None: ...

    def synchronize(self) -> None: ...

    def mem_get_info(self) -> tuple[int, int]: ...  # (free, total) bytes, everything on the device

    def max_memory_allocated(self) -> int: ...  # torch's peak since the last reset

    def memory_allocated(self) -> int: ...  # what torch holds now


@dataclass(frozen=True)
class CudaMemory:
    """``DeviceMemory`` on a CUDA device."""

    device: torch.device

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def reset_peak_memory_stats(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def mem_get_info(self) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(self.device)
        return int(free), int(total)

    def max_memory_allocated(self) -> int:
        return int(torch.cuda.max_memory_allocated(self.device))

    def memory_allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))


@dataclass(frozen=True)
class MemoryProfile:
    """What the profiling run measured, in bytes."""

    total: int  # the device's memory
    torch_peak: int  # weights + the activation peak of a full-budget step
    non_torch: int  # CUDA context, NCCL, other processes (never below 0)

    def kv_cache_budget(self, gpu_memory_utilization: float) -> int:
        """Bytes left for the KV cache within ``gpu_memory_utilization`` of the device."""
        return int(self.total * gpu_memory_utilization) - self.torch_peak - self.non_torch


def profile_memory(memory: DeviceMemory, profile_run: Callable[[], None]) -> MemoryProfile:
    """Run ``profile_run`` between a reset and a read of the peak counter; see the module docstring."""
    memory.empty_cache()
    memory.reset_peak_memory_stats()
    total = memory.mem_get_info()[1]
    profile_run()
    memory.synchronize()
    torch_peak = memory.max_memory_allocated()
    memory.empty_cache()  # what the profiling run cached but no longer uses is not "someone else's"
    free, _ = memory.mem_get_info()
    non_torch = max(total - free - memory.memory_allocated(), 0)
    return MemoryProfile(total, torch_peak, non_torch)
