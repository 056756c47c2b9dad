"""Schedulers the book compares vLLM V1 against (§11.1, §11.2); never imported by ``minivllm.core``."""

from minivllm.lab.baselines.prefill_first import PrefillFirstScheduler

__all__ = ["PrefillFirstScheduler"]
