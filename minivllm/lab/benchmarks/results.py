"""What both benchmarks share: the workload their flags describe, and the table / JSON / CSV of their results.

``python -m minivllm bench`` (``sweep.py``, the engine in this process) and ``python -m minivllm bench serve``
(``serve.py``, any OpenAI server) take the same workload flags (``--workload``, ``--num-prompts``,
``--request-rate``, ``--burstiness``, ``--seed``) and write one result per run point in one shape:
``{"point", "config", "workload", "metrics"}``. Mirrors the output side of vLLM's
``benchmarks/benchmark_serving.py`` (``--save-result``: one JSON document per run).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

from minivllm.config import flag_name

RUN_FLAGS = {"request_rate": float, "burstiness": float, "num_prompts": int, "seed": int, "cost_model": str}
COLUMNS = (  # (metric key, header, scale)
    ("ttft_p50", "TTFT p50 ms", 1e3),
    ("ttft_p99", "TTFT p99 ms", 1e3),
    ("tpot_p50", "TPOT p50 ms", 1e3),
    ("tpot_p99", "TPOT p99 ms", 1e3),
    ("itl_p99", "ITL p99 ms", 1e3),
    ("itl_max", "ITL max ms", 1e3),
    ("output_throughput", "out tok/s", 1.0),
    ("total_throughput", "tot tok/s", 1.0),
    ("mean_budget_utilisation", "budget %", 100.0),
    ("num_preemptions", "preempt", 1.0),
)


def load_workload(args: argparse.Namespace, point: dict[str, Any], vocab_size: int, max_model_len: int) -> Any:
    """The workload the flags (and a sweep point's overrides of them) describe, or the saved .json / .csv."""
    from minivllm.lab.sim.workload import Workload, make_workload

    if args.workload.endswith((".json", ".csv")):
        return Workload.load(args.workload)
    rate, burst = point.get("request_rate", args.request_rate), point.get("burstiness", args.burstiness)
    return make_workload(
        args.workload,
        point.get("num_prompts", args.num_prompts),
        rate=None if math.isinf(rate) else rate,
        arrival="poisson" if burst == 1.0 else "bursty",
        burstiness=burst,
        seed=point.get("seed", args.seed),
        vocab_size=vocab_size,
        max_model_len=max_model_len,
    )


def format_table(results: list[dict]) -> str:
    """One row per result: the sweep point's values, then the COLUMNS metrics."""
    keys = list(results[0]["point"]) if results and results[0]["point"] else []
    head = [flag_name(k)[2:] for k in keys] + [h for _, h, _ in COLUMNS]
    rows = [
        [str(r["point"][k]) for k in keys] + [f"{r['metrics'].get(m, math.nan) * s:.1f}" for m, _, s in COLUMNS]
        for r in results
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *rows])


def _clean(value: Any) -> Any:
    """NaN / inf -> None so the JSON is strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_outputs(args: argparse.Namespace, results: list[dict], argv: list[str]) -> None:
    """``--output-json`` (argv, ``args.mode``, every result) and ``--output-csv`` (one row per result)."""
    if args.output_json:
        doc = {"argv": argv, "mode": args.mode, "results": results}
        Path(args.output_json).write_text(json.dumps(_clean(doc), indent=1) + "\n")
    if args.output_csv:
        keys = list(results[0]["point"]) if results else []
        config_keys = [k for k in results[0]["config"] if k not in keys] if results else []
        metric_keys = list(results[0]["metrics"]) if results else []
        with open(args.output_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(keys + config_keys + metric_keys)
            for r in results:
                w.writerow(
                    [r["point"][k] for k in keys]
                    + [r["config"][k] for k in config_keys]
                    + [r["metrics"][k] for k in metric_keys]
                )
