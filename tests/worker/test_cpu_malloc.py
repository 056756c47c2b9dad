"""glibc malloc tuning (worker/cpu_malloc.py): a freed big tensor's memory is reused, not re-faulted."""

from __future__ import annotations

import resource

import pytest
import torch

from minivllm.worker.cpu_malloc import keep_freed_memory


def _faults_while_reallocating(nbytes: int, times: int) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        t = torch.empty(nbytes, dtype=torch.uint8)
        t.fill_(1)  # touch every page
        del t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_big_tensors_reuse_memory_after_tuning():
    if not keep_freed_memory():
        pytest.skip("not a glibc system")
    assert keep_freed_memory()  # idempotent
    nbytes = 24 << 20  # the size of one prefill step's MLP activation
    _faults_while_reallocating(nbytes, 10)  # warm-up: the heap grows to hold it
    pages = nbytes // 4096
    # Untuned, every round trips through mmap/munmap: ~`pages` faults per round (6,144 here).
    assert _faults_while_reallocating(nbytes, 10) < pages
