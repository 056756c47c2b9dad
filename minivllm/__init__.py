"""minivllm: a readable vLLM V1 engine core that serves a real model (book ch. 3-5, 11).

Public API: ``LLM``, ``LLMEngine``, ``SamplingParams``, ``EngineConfig`` (and the
configs it groups). Heavy modules (torch, transformers) load only when used.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if "torch" not in sys.modules and "OMP_WAIT_POLICY" not in os.environ:
    # A deviation from vLLM, for busy laptops: torch's OpenMP (libgomp) worker threads spin while they wait
    # for work (OMP_WAIT_POLICY=ACTIVE behaviour). When the laptop's cores are busy with other programs, the
    # spinning threads take the CPU the working thread needs. Measured on a 2-core machine at load ~10
    # (4 prompts x 32 greedy tokens, SmolLM2): 19.8 s wall / 13.8 s CPU spinning against 1.8 s / 1.8 s with
    # PASSIVE. PASSIVE threads sleep instead. But a CPU decode step makes ~150 short parallel calls, tens of
    # microseconds apart, and waking a thread that has gone to sleep costs about as long: libgomp's short spin
    # before sleeping (GOMP_SPINCOUNT; 1000 spins is ~10 us) catches many of those calls awake, and the
    # thread still sleeps between steps. SmolLM2, 16 requests, two threads, mean decode step: quiet 46-47 ms
    # PASSIVE, 35-38 ms with 1000 spins (30-33 ms with 10,000); beside two busy loops 53-79 ms PASSIVE,
    # 71-73 ms with 1000 spins (79-90 ms with 3000); minivllm/lab/README.md has the table. libgomp reads both
    # variables once, when torch is first imported, so they are set only if minivllm is imported first and
    # OMP_WAIT_POLICY is unset; set OMP_WAIT_POLICY (and GOMP_SPINCOUNT) yourself to choose otherwise.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")

from minivllm.config import CacheConfig, EngineConfig, ModelConfig, SchedulerConfig
from minivllm.sampling_params import SamplingParams

if TYPE_CHECKING:
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.entrypoints.llm import LLM

__all__ = ["LLM", "LLMEngine", "SamplingParams", "EngineConfig", "ModelConfig", "CacheConfig", "SchedulerConfig"]


def __getattr__(name: str):
    if name == "LLM":
        from minivllm.entrypoints.llm import LLM

        return LLM
    if name == "LLMEngine":
        from minivllm.engine.llm_engine import LLMEngine

        return LLMEngine
    raise AttributeError(f"module 'minivllm' has no attribute {name!r}")
