"""Is Triton importable, and is it running its CPU interpreter? (vLLM: ``vllm/triton_utils/importing.py``)."""

from __future__ import annotations

import importlib.util
import os


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def triton_interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")
