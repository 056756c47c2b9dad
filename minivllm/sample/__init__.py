"""Sampling: greedy / temperature / top-k / top-p with per-request seeded generators."""

from minivllm.sample.sampler import Sampler, apply_min_tokens, apply_top_k_top_p, make_generator

__all__ = ["Sampler", "apply_min_tokens", "apply_top_k_top_p", "make_generator"]
