"""Where one engine step's time goes, by operator group (§11.9; ``throughput --profile``).

``torch.profiler`` self time of every operator in the step, summed into groups a reader can act on:
the linear layers, attention itself, the paged KV cache's gathers and writes, and the elementwise
work around them (norms, RoPE, SiLU, residual adds).
"""

from __future__ import annotations

from collections import defaultdict

from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams

OP_GROUPS = (  # (label, substrings of profiler op names), first match wins
    ("linear layers (GEMM)", ("linear", "addmm", "aten::mm", "matmul")),
    ("attention (SDPA, C++ decode kernel)", ("attention", "paged_decode")),
    ("KV cache gather/write", ("index_select", "index_copy")),
    ("elementwise (norm, RoPE, SiLU, residual)", ("norm", "mul", "add", "silu", "pow", "mean", "rsqrt", "cat", "sub")),
)


def op_breakdown(step_fn) -> dict[str, float]:
    """Milliseconds per operator group for one engine step (torch.profiler, self time)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step_fn()
    groups: dict[str, float] = defaultdict(float)
    for ev in prof.key_averages():
        label = next((g for g, keys in OP_GROUPS if any(k in ev.key for k in keys)), "other")
        groups[label] += ev.self_cpu_time_total / 1e3
    return dict(groups)


def profile_steps(engine: LLMEngine, prompts: list[list[int]], new_tokens: int) -> dict[str, dict[str, float]]:
    """Op groups of the first (prompt-only) step and of a pure decode step, on an idle, warmed-up engine."""
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    out = {"first prompt step": op_breakdown(engine.step)}
    while any(s.prefill_tokens for s in engine.trace.steps[-1:]):
        engine.step()
    out["a decode step"] = op_breakdown(engine.step)
    return out
