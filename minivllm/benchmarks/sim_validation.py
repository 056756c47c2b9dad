"""Published vLLM runs replayed in the simulator: published vs simulated, and the ratio (§11.7, issue 19).

``python -m minivllm.benchmarks.sim_validation [--output-json PATH] [--max-requests N] [--run NAME ...]``

For each run in :data:`minivllm.sim.published_runs.PUBLISHED_RUNS` this builds the run's workload (fixed
lengths, or the per-request lengths the source recorded, all at the arrival times it states), saves it, and
runs it through the code path of ``python -m minivllm bench --mode sim`` (``sweep.build_parser`` +
``sweep.run_point``: the real Scheduler on a virtual clock priced by a cost-model preset) with the run's
scheduler flags; then it prints one row per published metric: published, simulated, ratio = simulated /
published.

The runs are of Llama-3-8B, but today's GPU presets (``llama2_7b_a100`` / ``llama2_7b_h100``) price Llama-2-7B:
6.7e9 parameters of weights instead of 8.0e9, and MHA KV bytes per token (32 KV heads: 524,288 B) instead of
Llama-3-8B's GQA (8 KV heads: 131,072 B), so attention's KV reads cost 4x and the KV cache holds 4x fewer
tokens. Each run's block says which preset stood in and these differences. Issue 19's "adjusted" numbers need
Llama-3-8B presets: a later step (this benchmark only writes the targets down and measures today's distance).
No accuracy threshold is checked here (that is the later step's test).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from minivllm.config import flag_name
from minivllm.sampling_params import SamplingParams
from minivllm.sim.cost_model import CostModel
from minivllm.sim.memory import llama2_7b
from minivllm.sim.published_runs import LLAMA3_8B_FACTS, PUBLISHED_RUNS, PublishedRun, get_run
from minivllm.sim.workload import Workload, WorkloadRequest

# published metric name -> (key of summarize(trace).to_dict(), scale to the published unit)
SIM_METRICS: dict[str, tuple[str, float]] = {
    "latency_avg_ms": ("duration", 1e3),  # one batch at t = 0: time until its last request finishes
    "median_e2e_s": ("e2e_p50", 1.0),
    "mean_e2e_s": ("e2e_mean", 1.0),
    "mean_ttft_s": ("ttft_mean", 1.0),
    "median_ttft_s": ("ttft_p50", 1.0),
    "median_tpot_ms": ("tpot_p50", 1e3),
    "duration_s": ("duration", 1.0),
    "output_throughput_tok_s": ("output_throughput", 1.0),
}
HEADER = ("run", "metric", "published", "simulated", "ratio")


def build_workload(run: PublishedRun, vocab_size: int, max_requests: int | None = None, seed: int = 0) -> Workload:
    """The run's requests (the first ``max_requests`` of them if given), random token ids, ignore_eos."""
    lengths = run.workload.lengths()[:max_requests]
    rng = np.random.default_rng(seed)
    rate = run.workload.request_rate
    gaps = rng.exponential(1.0 / rate, len(lengths) - 1) if rate else np.zeros(len(lengths) - 1)
    times = np.concatenate([[0.0], np.cumsum(gaps)])
    requests = [
        WorkloadRequest(
            f"req-{i}",
            float(t),
            rng.integers(3, vocab_size, p).tolist(),
            SamplingParams(max_tokens=o, temperature=0.0, ignore_eos=True),
        )
        for i, ((p, o), t) in enumerate(zip(lengths, times))
    ]
    params = {"published_run": run.name, "num_requests": len(requests), "request_rate": rate}
    return Workload(f"published:{run.name}", seed, requests, params)


def bench_argv(run: PublishedRun, workload_path: str) -> list[str]:
    """``python -m minivllm bench`` flags for this run (the run's replay settings, vLLM-named)."""
    argv = ["--mode", "sim", "--cost-model", run.preset, "--workload", workload_path, "--no-progress"]
    for name, value in run.replay.items():
        if isinstance(value, bool):
            argv.append(flag_name(name) if value else "--no-" + flag_name(name)[2:])
        else:
            argv += [flag_name(name), str(value)]
    return argv


def stand_in(run: PublishedRun) -> dict[str, Any]:
    """Which preset priced the run and how its model differs from the run's (weights, KV bytes per token)."""
    preset = CostModel.from_preset(run.preset)
    return {
        "preset": run.preset,
        "preset_params": llama2_7b(80).weights_bytes / 2,  # 2 bytes per fp16 parameter
        "run_params": LLAMA3_8B_FACTS["params"],
        "preset_kv_bytes_per_token": preset.kv_bytes_per_token,
        "run_kv_bytes_per_token": LLAMA3_8B_FACTS["kv_bytes_per_token"],
        "preset_attention": "MHA (32 KV heads)",
        "run_attention": LLAMA3_8B_FACTS["attention"],
    }


def replay(run: PublishedRun, max_requests: int | None = None) -> dict[str, Any]:
    """Run one published run in the simulator; its rows: published, simulated and their ratio per metric."""
    from minivllm.benchmarks import sweep

    vocab = CostModel.from_preset(run.preset).vocab_size
    workload = build_workload(run, vocab, max_requests)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "workload.json")
        workload.save(path)
        argv = bench_argv(run, path)
        args = sweep.build_parser().parse_args(argv)
        result = sweep.run_point(args, {}, {}, None)
    metrics = result["metrics"]
    rows = []
    for name, published in run.metrics.items():
        key, scale = SIM_METRICS[name]
        simulated = metrics[key] * scale
        rows.append({"metric": name, "published": published, "simulated": simulated, "ratio": simulated / published})
    return {
        "run": run.name,
        "source": run.source,
        "vllm_version": run.vllm_version,
        "model": run.model,
        "gpu": run.gpu,
        "tensor_parallel_size": run.tensor_parallel_size,
        "workload": run.workload.description,
        "num_requests": len(workload.requests),
        "bench_argv": argv[:4] + ["<workload.json>"] + argv[6:],
        "replay_notes": run.replay_notes,
        "stand_in": stand_in(run),
        "num_preemptions": metrics["num_preemptions"],
        "rows": rows,
    }


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def format_table(results: list[dict[str, Any]]) -> str:
    """One line per (run, metric): run, metric, published, simulated, ratio (simulated / published)."""
    lines = [list(HEADER)]
    for r in results:
        for row in r["rows"]:
            lines.append(
                [r["run"], row["metric"], _fmt(row["published"]), _fmt(row["simulated"]), f"{row['ratio']:.3f}"]
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in enumerate(zip(line, widths))) for line in lines
    )


def describe(r: dict[str, Any]) -> str:
    s = r["stand_in"]
    return (
        f"{r['run']}: {r['model']} on {r['gpu']}, TP{r['tensor_parallel_size']}, vLLM {r['vllm_version']}\n"
        f"  source: {r['source']}\n"
        f"  workload: {r['workload']} ({r['num_requests']} replayed)\n"
        f"  stand-in preset {s['preset']}: weights {s['preset_params'] / 1e9:.1f} vs {s['run_params'] / 1e9:.1f} B "
        f"params; KV bytes/token {s['preset_kv_bytes_per_token']:,} ({s['preset_attention']}) vs "
        f"{s['run_kv_bytes_per_token']:,} ({s['run_attention']})\n"
        f"  replay: {' '.join(r['bench_argv'])}; {r['num_preemptions']} preemptions\n"
        f"  assumptions: {r['replay_notes']}"
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(
        prog="python -m minivllm.benchmarks.sim_validation", description=__doc__.splitlines()[0]
    )
    p.add_argument("--output-json", help="write every run's rows, source, settings and stand-in facts here")
    p.add_argument("--max-requests", type=int, help="replay only each run's first N requests (a quick check)")
    p.add_argument("--run", action="append", default=[], help="replay only this run (repeatable)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.max_requests is not None and args.max_requests < 1:
        p.error(f"--max-requests must be >= 1, got {args.max_requests}")
    try:
        runs = [get_run(n) for n in args.run] if args.run else list(PUBLISHED_RUNS)
    except ValueError as e:
        p.error(f"--run: {e}")
    results = [replay(run, args.max_requests) for run in runs]
    for r in results:
        print(describe(r))
    print()
    print(format_table(results))
    if args.output_json:
        doc = {"argv": sys.argv[1:] if argv is None else list(argv), "max_requests": args.max_requests, "runs": results}
        Path(args.output_json).write_text(json.dumps(doc, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
