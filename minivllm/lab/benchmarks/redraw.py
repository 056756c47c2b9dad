"""``python -m minivllm.lab.benchmarks.redraw``: how long a redraw takes on a 500-step trace (a print, not a test).

Times each pure builder, a step-player tick and a Gantt swap into a live FigureWidget, as
the median of a few runs (after one warm-up, so plotly's validators are loaded).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from minivllm.lab.sim.run import simulate
from minivllm.lab.viz import figures as F


def timed(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(num_steps: int = 500) -> dict[str, float]:
    import plotly.graph_objects as go

    from minivllm.lab.sim.workload import make_workload
    from minivllm.lab.viz.widgets.base import sync_figure
    from minivllm.lab.viz.widgets.player import StepPlayer

    w = make_workload("uniform", 300, rate=40.0, seed=0, vocab_size=32000, max_model_len=1024)
    run = simulate(
        w.requests,
        max_steps=num_steps,
        max_num_batched_tokens=256,
        max_num_seqs=64,
        max_model_len=1024,
        num_gpu_blocks=1200,
    )
    trace = run.trace
    if trace is None:
        raise RuntimeError(f"The simulated run failed: {run.message}")
    n_bars = sum(len(s.prefill_tokens) + len(s.decode_tokens) for s in trace.steps)
    print(f"trace: {len(trace.steps)} steps, {len(trace.requests)} requests, {n_bars} request-steps")
    results = {
        "latency_gantt": timed(lambda: F.latency_gantt(trace)),
        "chunk_schedule": timed(lambda: F.chunk_schedule(trace)),
        "recovery_timeline": timed(lambda: F.recovery_timeline(trace)),
        "latency_cdfs": timed(lambda: F.latency_cdfs(trace)),
        "queue_kv_over_time": timed(lambda: F.queue_kv_over_time(trace)),
    }
    fw = go.FigureWidget(F.latency_gantt(trace))
    results["gantt -> FigureWidget"] = timed(lambda: sync_figure(fw, F.latency_gantt(trace)))
    player = StepPlayer(trace)
    ticks = iter(range(10**6))
    results["step player tick"] = timed(lambda: setattr(player.slider, "value", next(ticks) % len(trace.steps)))
    for name, t in results.items():
        print(f"{name:<24} {t * 1e3:8.1f} ms")
    return results


if __name__ == "__main__":
    main()
