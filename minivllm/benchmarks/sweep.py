"""``python -m minivllm bench``: offline benchmark and sweeps, real engine or simulator (§11.7).

Mirrors vLLM's ``benchmarks/benchmark_serving.py`` (``--request-rate``, ``--burstiness``,
``--num-prompts``, TTFT / TPOT / ITL / throughput) and takes the engine flags by vLLM's names
(``vllm/engine/arg_utils.py``). ``--sweep NAME=V1,V2`` (repeatable: a grid) runs one engine per
point; ``--mode sim`` replays the same Scheduler on a virtual clock priced by a cost-model preset
(Vidur-style), ``--mode real`` runs the model (loaded once, reused by every point).

Example: ``python -m minivllm bench --mode sim --cost-model llama2_7b_a100 --workload sharegpt
--num-prompts 200 --request-rate 2 --sweep max-num-batched-tokens=128,512,2048,8192``
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

from minivllm.config import DEFAULT_MAX_MODEL_LEN, EngineConfig, flag_name

ENGINE_FLAGS = {  # config field -> argparse type (None: --x / --no-x)
    "model": str,
    "max_num_batched_tokens": int,
    "long_prefill_token_threshold": int,
    "enable_chunked_prefill": None,
    "max_num_seqs": int,
    "max_model_len": int,
    "enable_prefix_caching": None,
    "block_size": int,
    "num_gpu_blocks": int,
    "policy": str,
    "num_speculative_tokens": int,  # n-gram speculative decoding (vLLM's speculative_config)
    "prompt_lookup_max": int,
    "prompt_lookup_min": int,
}
RUN_FLAGS = {"request_rate": float, "burstiness": float, "num_prompts": int, "seed": int, "cost_model": str}
COLUMNS = (  # (metric key, header, scale)
    ("ttft_p50", "TTFT p50 ms", 1e3), ("ttft_p99", "TTFT p99 ms", 1e3), ("tpot_p50", "TPOT p50 ms", 1e3),
    ("tpot_p99", "TPOT p99 ms", 1e3), ("itl_p99", "ITL p99 ms", 1e3), ("itl_max", "ITL max ms", 1e3),
    ("output_throughput", "out tok/s", 1.0), ("total_throughput", "tot tok/s", 1.0),
    ("mean_budget_utilisation", "budget %", 100.0), ("num_preemptions", "preempt", 1.0),
)  # fmt: skip


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minivllm bench", description=__doc__.splitlines()[0])
    for name, typ in ENGINE_FLAGS.items():
        if typ is None:
            p.add_argument(flag_name(name), action=argparse.BooleanOptionalAction, default=None)
        else:
            p.add_argument(flag_name(name), type=typ, default="smollm2" if name == "model" else None)
    p.add_argument("--workload", default="uniform", help="a workload kind, or a saved workload .json / .csv")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--request-rate", type=float, default=math.inf, help="requests/s; inf = all at t=0")
    p.add_argument("--burstiness", type=float, default=1.0, help="CV of the arrival gaps (1 = Poisson)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=("real", "sim"), default="sim")
    p.add_argument("--cost-model", default="cpu_smollm2", help="sim: a preset in minivllm/sim/presets or a .json")
    p.add_argument("--threads", type=int, help="real mode: torch.set_num_threads (default: torch's own)")
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2,...", help="repeatable: a grid")
    p.add_argument("--output-json")
    p.add_argument("--output-csv")
    p.add_argument("--no-progress", action="store_true")
    return p


def parse_sweeps(parser: argparse.ArgumentParser, sweeps: list[str]) -> list[dict[str, Any]]:
    """``["max-num-seqs=8,16", "policy=fcfs"]`` -> the grid of points (dicts field -> value)."""
    axes: dict[str, list[Any]] = {}
    kinds = {**ENGINE_FLAGS, **RUN_FLAGS}
    for spec in sweeps:
        name, sep, values = spec.partition("=")
        field = name.strip().lstrip("-").replace("-", "_")
        if not sep or not values:
            parser.error(f"--sweep: expected NAME=V1,V2,..., got {spec!r}")
        if field not in kinds:
            parser.error(f"--sweep: unknown flag {name!r}; allowed: {', '.join(flag_name(k)[2:] for k in kinds)}")
        typ = kinds[field] or _bool
        try:
            axes[field] = [typ(v.strip()) for v in values.split(",")]
        except ValueError as e:
            parser.error(f"--sweep {flag_name(field)}: {e}")
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def _flag_error(parser: argparse.ArgumentParser, err: Exception) -> None:
    """argparse error naming the flag the config / workload complained about."""
    msg = str(err)
    alias = {"rate": "request_rate", "num_requests": "num_prompts", "prompt_len": "workload"}
    names = sorted({*ENGINE_FLAGS, *RUN_FLAGS, *alias}, key=len, reverse=True)
    found = next((n for n in names if re.match(rf"^\W*{n}\b", msg)), None)
    found = found or next((n for n in names if re.search(rf"\b{n}\b", msg)), None)
    parser.error(f"{flag_name(alias.get(found, found)) if found else '--workload'}: {msg}")


def load_workload(args: argparse.Namespace, point: dict[str, Any], vocab_size: int, max_model_len: int) -> Any:
    from minivllm.sim.workload import Workload, make_workload

    if args.workload.endswith((".json", ".csv")):
        return Workload.load(args.workload)
    rate, burst = point.get("request_rate", args.request_rate), point.get("burstiness", args.burstiness)
    return make_workload(
        args.workload, point.get("num_prompts", args.num_prompts),
        rate=None if math.isinf(rate) else rate, arrival="poisson" if burst == 1.0 else "bursty",
        burstiness=burst, seed=point.get("seed", args.seed), vocab_size=vocab_size, max_model_len=max_model_len,
    )  # fmt: skip


def run_point(args: argparse.Namespace, point: dict[str, Any], cache: dict[str, Any], progress: Any) -> dict:
    """Build one engine for this sweep point, run the workload, summarise the trace."""
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.metrics.summary import summarize

    kwargs = {k: point.get(k, getattr(args, k)) for k in ENGINE_FLAGS}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if args.mode == "sim":
        from minivllm.sim.cost_model import CostModel
        from minivllm.sim.sim_runner import SimRunner

        cost_model = CostModel.from_preset(point.get("cost_model", args.cost_model))
        vocab, max_len = cost_model.vocab_size, cost_model.max_model_len
    else:
        from minivllm.model.loader import load_model, resolve_dtype
        from minivllm.worker.model_runner import ModelRunner, resolve_device

        if kwargs["model"] not in cache:  # loaded once, shared by every sweep point (as ModelRunner would)
            device = resolve_device("auto")
            dtype = resolve_dtype("bfloat16" if device.type == "cuda" else "float32")
            cache[kwargs["model"]] = load_model(kwargs["model"], dtype, device)
        loaded = cache[kwargs["model"]]
        vocab, max_len = loaded.arch.vocab_size, loaded.arch.max_position_embeddings
    kwargs.setdefault("max_model_len", min(max_len, DEFAULT_MAX_MODEL_LEN))
    config = EngineConfig.from_kwargs(**kwargs)
    if args.mode == "sim":
        executor = SimRunner(
            cost_model,
            vocab_size=vocab,
            config=config,
            num_spec_tokens=config.speculative_config.num_speculative_tokens,
        )
    else:
        executor = ModelRunner(config, loaded)
    engine = LLMEngine(config, executor=executor)
    workload = load_workload(args, point, vocab, config.scheduler_config.max_model_len)
    on_step = (lambda e: progress.update(len(e.trace.steps[-1].finished))) if progress is not None else None
    t0 = time.perf_counter()
    engine.run(workload.requests, on_step=on_step)
    wall = time.perf_counter() - t0
    metrics = summarize(engine.trace).to_dict()
    metrics.update(wall_time_s=wall, requests_per_wall_s=len(workload.requests) / wall if wall > 0 else math.nan)
    config_out = {**kwargs, **{k: point.get(k, getattr(args, k)) for k in RUN_FLAGS}}
    return {"point": point, "config": config_out, "workload": workload.params, "metrics": metrics}


def format_table(results: list[dict]) -> str:
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
                w.writerow([r["point"][k] for k in keys] + [r["config"][k] for k in config_keys]
                           + [r["metrics"][k] for k in metric_keys])  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    points = parse_sweeps(parser, args.sweep) or [{}]
    if args.mode == "sim":
        from minivllm.sim.cost_model import CostModel

        for name in {p.get("cost_model", args.cost_model) for p in points}:
            try:
                CostModel.from_preset(name)
            except ValueError as e:
                parser.error(f"--cost-model: {e}")
    total = 0
    for point in points:  # reject bad values before any engine runs
        kwargs = {k: point.get(k, getattr(args, k)) for k in ENGINE_FLAGS}
        try:
            EngineConfig.from_kwargs(**{k: v for k, v in kwargs.items() if v is not None})
            max_len = kwargs.get("max_model_len") or DEFAULT_MAX_MODEL_LEN
            total += len(load_workload(args, point, 49152, max_len).requests)
        except (ValueError, OSError) as e:
            _flag_error(parser, e)
    if args.mode == "real" and args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    cache: dict[str, Any] = {}
    results = []
    with tqdm(total=total, unit="req", disable=args.no_progress, file=sys.stderr) as progress:
        for point in points:
            try:
                results.append(run_point(args, point, cache, progress))
            except ValueError as e:
                _flag_error(parser, e)
    print(format_table(results))
    write_outputs(args, results, argv)
    return results
