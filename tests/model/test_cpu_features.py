"""dtype=bfloat16 on a CPU: a warning where /proc/cpuinfo shows neither AVX512_BF16 nor AMX, never a refusal."""

from __future__ import annotations

import logging

import pytest
import torch

from minivllm.model import cpu_features


@pytest.fixture
def flags(monkeypatch):
    def set_flags(value):
        monkeypatch.setattr(cpu_features, "cpu_flags", lambda: value)
        cpu_features.check_cpu_dtype.cache_clear()

    yield set_flags
    cpu_features.check_cpu_dtype.cache_clear()


def test_native_bf16_from_flags():
    assert cpu_features.native_bf16(frozenset({"avx2", "avx512f", "avx512_bf16"})) is True
    assert cpu_features.native_bf16(frozenset({"amx_tile", "amx_bf16"})) is True
    assert cpu_features.native_bf16(frozenset({"fp", "asimd", "bf16"})) is True  # Arm FEAT_BF16
    assert cpu_features.native_bf16(frozenset({"avx2", "avx512f", "fma"})) is False
    assert cpu_features.native_bf16(None) is None  # no /proc/cpuinfo: unknown, no warning


def test_this_machines_flags_are_read_on_linux():
    flags = cpu_features.cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo here")
    assert flags  # a Linux /proc/cpuinfo has a flags (x86) or Features (Arm) line


def test_bf16_without_the_flags_warns_once(flags, caplog):
    flags(frozenset({"avx2", "fma"}))
    with caplog.at_level(logging.WARNING, logger=cpu_features.__name__):
        first = cpu_features.check_cpu_dtype(torch.bfloat16, "cpu")
        cpu_features.check_cpu_dtype(torch.bfloat16, "cpu")
    assert first is not None and "dtype=bfloat16" in first and "avx512_bf16" in first
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    ("value", "dtype", "device"),
    [
        (frozenset({"avx512_bf16"}), torch.bfloat16, "cpu"),
        (None, torch.bfloat16, "cpu"),
        (frozenset({"avx2"}), torch.float32, "cpu"),
        (frozenset({"avx2"}), torch.bfloat16, "cuda"),
    ],
)
def test_no_warning_otherwise(flags, value, dtype, device):
    flags(value)
    assert cpu_features.check_cpu_dtype(dtype, device) is None
