"""A stand-in for ``torch.cuda``'s memory calls (minivllm.worker.device_memory.DeviceMemory): it reports
the numbers a test gives it and logs every call, so the CUDA branch of the KV-cache sizing runs on a CPU."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FakeDeviceMemory:
    total: int  # the device's bytes
    torch_peak: int  # what max_memory_allocated reports after a reset
    torch_now: int  # what memory_allocated reports (weights)
    others: int  # bytes in use that torch did not allocate (CUDA context, other processes)
    cached: int = 0  # torch's cache, freed by empty_cache
    calls: list[str] = field(default_factory=list)

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")
        self.cached = 0

    def reset_peak_memory_stats(self) -> None:
        self.calls.append("reset_peak_memory_stats")

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def mem_get_info(self) -> tuple[int, int]:
        self.calls.append("mem_get_info")
        return self.total - self.torch_now - self.cached - self.others, self.total

    def max_memory_allocated(self) -> int:
        self.calls.append("max_memory_allocated")
        return self.torch_peak

    def memory_allocated(self) -> int:
        self.calls.append("memory_allocated")
        return self.torch_now
