"""Seeded scenes for every figure: the committed screenshots and the browser test draw these.

All runs use the simulator (llama2_7b_a100 preset) on seeded workloads, so the figures are
the same on every machine and take a few seconds in all to build.
"""

from __future__ import annotations

from typing import Any

from minivllm.lab.sim.run import SimResult, demo_workload, shared_prefix_workload, simulate
from minivllm.lab.viz.figures.blocks import block_map_data, kv_block_map
from minivllm.lab.viz.figures.curves import chunk_size_curves, latency_cdfs, queue_kv_over_time
from minivllm.lab.viz.figures.gantt import gantt_compare
from minivllm.lab.viz.figures.recovery import recovery_timeline
from minivllm.lab.viz.figures.schedule import chunk_schedule
from minivllm.metrics.trace import EngineTrace

MAX_MODEL_LEN = 4096
SWEEP_BUDGETS = (64, 128, 256, 512, 1024, 2048, 4096)


def _trace(result: SimResult) -> EngineTrace:
    """The run's trace: the gallery's settings are valid, so a run without one is a bug to report, not to draw."""
    if result.trace is None:
        raise RuntimeError(f"A gallery simulation failed: {result.message}")
    return result.trace


def chunked_vs_unchunked(budget: int = 256, num_requests: int = 12) -> dict[str, EngineTrace]:
    """§11.1's scene run twice: chunked prefill with ``budget``, and chunking off."""
    reqs = demo_workload(num_requests)
    common: dict[str, Any] = dict(max_num_seqs=16, max_model_len=MAX_MODEL_LEN, num_gpu_blocks=600)
    chunked = simulate(reqs, max_num_batched_tokens=budget, **common)
    whole = simulate(reqs, max_num_batched_tokens=MAX_MODEL_LEN, enable_chunked_prefill=False, **common)
    return {f"chunked prefill (budget {budget})": _trace(chunked), "chunked prefill off": _trace(whole)}


def small_pool_run(num_gpu_blocks: int = 40) -> EngineTrace:
    """Two shared system prompts, a 40-block pool: prefix hits, sharing, eviction and preemption."""
    result = simulate(
        shared_prefix_workload(),
        max_num_batched_tokens=64,
        max_num_seqs=8,
        max_model_len=256,
        num_gpu_blocks=num_gpu_blocks,
        block_size=16,
        record_block_pool=True,
    )
    return _trace(result)


def sweep_results(budgets: tuple[int, ...] = SWEEP_BUDGETS) -> dict[int, dict[str, float]]:
    """One simulated run per chunk budget on an Azure-conversation workload at 8 req/s, with its compute
    utilisation (share of the preset's peak FLOP/s, ``minivllm.lab.sim.utilisation``)."""
    from minivllm.lab.metrics.summary import summarize
    from minivllm.lab.sim.cost_model import CostModel
    from minivllm.lab.sim.run import DEFAULT_PRESET
    from minivllm.lab.sim.utilisation import trace_utilisation
    from minivllm.lab.sim.workload import make_workload

    w = make_workload("azure_conv", 80, rate=8.0, seed=0, vocab_size=32000, max_model_len=MAX_MODEL_LEN)
    out = {}
    for b in budgets:
        r = simulate(
            w.requests, max_num_batched_tokens=b, max_num_seqs=64, max_model_len=MAX_MODEL_LEN, num_gpu_blocks=1500
        )
        model = CostModel.from_preset(DEFAULT_PRESET)
        trace = _trace(r)
        out[b] = {**summarize(trace).to_dict(), "utilisation": trace_utilisation(model, trace.steps)}
    return out


def busiest_block_step(trace: EngineTrace) -> int:
    """The first step whose block map shows the most kinds of block at once."""

    def kinds(k: int) -> int:
        s = trace.steps[k]
        if s.block_pool is None:
            raise ValueError(f"busiest_block_step needs a trace run with record_block_pool=True (step {k} has none).")
        return sum(v > 0 for v in block_map_data(s.block_pool, s.block_tables).counts.values())

    return max(range(len(trace.steps)), key=lambda k: (kinds(k), -k))


def gallery(sweep: bool = True) -> dict:
    """name -> figure, one per builder (``sweep=False`` skips the slowest, the chunk-size sweep)."""
    runs = chunked_vs_unchunked()
    chunked = next(iter(runs.values()))
    pool = small_pool_run()
    k = busiest_block_step(pool)
    s = pool.steps[k]
    figs = {
        "gantt_chunked_vs_unchunked": gantt_compare(runs),
        "chunk_schedule": chunk_schedule(chunked),
        "kv_block_map": kv_block_map(s.block_pool, s.block_tables, f"KV block map after step {k} (§11.5)"),
        "recovery_timeline": recovery_timeline(pool, block_size=16),
        "latency_cdfs": latency_cdfs(runs),
        "queue_kv_over_time": queue_kv_over_time(runs),
    }
    if sweep:
        figs["chunk_size_curves"] = chunk_size_curves(sweep_results())
    return figs
