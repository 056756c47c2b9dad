"""``python -m minivllm bench``: offline benchmark and sweeps, real engine or simulator (§11.7).

Mirrors vLLM's ``benchmarks/benchmark_serving.py`` (``--request-rate``, ``--burstiness``,
``--num-prompts``, TTFT / TPOT / ITL / throughput) and takes the engine flags by vLLM's names
(``vllm/engine/arg_utils.py``, here :mod:`minivllm.engine.arg_utils`). ``--sweep NAME=V1,V2`` (repeatable: a
grid) runs one engine per point; ``--mode sim`` replays the same Scheduler on a virtual clock priced by a
cost-model preset (Vidur-style), ``--mode real`` runs the model (loaded once, reused by every point).

``--engine-generation`` / ``--num-scheduler-steps`` price the simulated steps as another vLLM engine than the
preset's own (:mod:`minivllm.lab.sim.generation`: vLLM 0.6's serial host work and multi-step bursts, or V1's
overlap).

Example: ``python -m minivllm bench --mode sim --cost-model llama2_7b_a100 --workload sharegpt
--num-prompts 200 --request-rate 2 --sweep max-num-batched-tokens=128,512,2048,8192``
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minivllm.config import DEFAULT_MAX_MODEL_LEN, EngineConfig, flag_name
from minivllm.engine.arg_utils import ENGINE_ARGS, add_engine_args, build_engine, engine_kwargs, load_engine_model
from minivllm.lab.benchmarks.results import RUN_FLAGS, format_table, load_workload, write_outputs
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.generation import GENERATIONS
from minivllm.lab.sim.run import run_workload

if TYPE_CHECKING:
    from minivllm.worker.base import ModelRunnerBase

# Every engine flag, except where a run flag has the name: --seed is the workload's seed (the model's stays 0).
ENGINE_FLAGS = tuple(name for name in ENGINE_ARGS if name not in RUN_FLAGS)
# --scheduler-cls, as vLLM's EngineArgs names it (vLLM takes any dotted path; here the two schedulers there are)
SCHEDULERS = ("minivllm.core.scheduler.Scheduler", "minivllm.lab.baselines.PrefillFirstScheduler")


def scheduler_class(name: str) -> Any:
    """The class for a --scheduler-cls value: the V1 Scheduler, or V0's prefill-first policy (a baseline)."""
    if name == SCHEDULERS[1]:
        from minivllm.lab.baselines import PrefillFirstScheduler

        return PrefillFirstScheduler
    from minivllm.core.scheduler import Scheduler

    return Scheduler


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minivllm bench", description=__doc__.splitlines()[0])
    add_engine_args(p, only=ENGINE_FLAGS)
    p.add_argument("--workload", default="uniform", help="a workload kind, or a saved workload .json / .csv")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--request-rate", type=float, default=math.inf, help="requests/s; inf = all at t=0")
    p.add_argument("--burstiness", type=float, default=1.0, help="CV of the arrival gaps (1 = Poisson)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--scheduler-cls",
        choices=SCHEDULERS,
        default=SCHEDULERS[0],
        help="the V1 scheduler, or vLLM V0's default policy (prefill-only steps; needs --no-enable-chunked-prefill)",
    )
    p.add_argument("--mode", choices=("real", "sim"), default="sim")
    p.add_argument(
        "--cost-model",
        default="cpu_smollm2",
        help="sim: a preset in minivllm/lab/sim/presets or a .json; a CPU preset stands for this machine's local fit "
        "when one is cached (python -m minivllm.lab.sim.calibrate --local), else the stored one, with a warning",
    )
    p.add_argument(
        "--engine-generation",
        choices=GENERATIONS,
        help="sim: price the steps as this vLLM engine instead of the preset's own (v0.6-multistep: host work "
        "added to each step; v1: overlapped with the GPU); minivllm.lab.sim.generation",
    )
    p.add_argument(
        "--num-scheduler-steps",
        type=int,
        help="sim, with a v0.6-multistep engine: vLLM 0.6's --num-scheduler-steps (decode steps per scheduler call)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="real mode: torch.set_num_threads (default: torch's own); sim mode: the torch threads of the "
        "local CPU fit to use (default 1)",
    )
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2,...", help="repeatable: a grid")
    p.add_argument("--output-json")
    p.add_argument("--output-csv")
    p.add_argument("--no-progress", action="store_true")
    return p


def parse_sweeps(parser: argparse.ArgumentParser, sweeps: list[str]) -> list[dict[str, Any]]:
    """``["max-num-seqs=8,16", "policy=fcfs"]`` -> the grid of points (dicts field -> value)."""
    axes: dict[str, list[Any]] = {}
    kinds = {**{name: ENGINE_ARGS[name].type for name in ENGINE_FLAGS}, **RUN_FLAGS}
    for spec in sweeps:
        name, sep, values = spec.partition("=")
        field = name.strip().lstrip("-").replace("-", "_")
        if not sep or not values:
            parser.error(f"--sweep: expected NAME=V1,V2,..., got {spec!r}")
        if field not in kinds:
            parser.error(f"--sweep: unknown flag {name!r}; allowed: {', '.join(flag_name(k)[2:] for k in kinds)}")
        typ = _bool if kinds[field] is bool else kinds[field]
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


def with_generation(model: CostModel, engine_generation: str | None, num_scheduler_steps: int | None) -> CostModel:
    """``model`` priced as another engine generation / burst length when given (a copy, checked); else itself."""
    if engine_generation is None and num_scheduler_steps is None:
        return model
    changes: dict[str, Any] = {}
    if engine_generation is not None:
        changes["engine_generation"] = engine_generation
    if num_scheduler_steps is not None:
        changes["num_scheduler_steps"] = num_scheduler_steps
    return CostModel(**{**model.to_dict(), **changes})


def build_point(args: argparse.Namespace, point: dict[str, Any], cache: dict[tuple, Any]) -> tuple[Any, Any, Any]:
    """One sweep point's engine, its workload and its intake (``run_workload(intake=...)``; None: none)."""
    kwargs = engine_kwargs(args, point)
    make_runner: Callable[[EngineConfig], ModelRunnerBase] | None  # None: the real model runner
    if args.mode == "sim":
        from minivllm.lab.sim.local_fit import resolve_cost_model
        from minivllm.lab.sim.sim_runner import SimRunner

        cost_model = with_generation(
            resolve_cost_model(point.get("cost_model", args.cost_model), args.threads or 1),
            args.engine_generation,
            args.num_scheduler_steps,
        )
        vocab, max_len, loaded = cost_model.vocab_size, cost_model.max_model_len, None
        intake = cost_model.intake()

        def make_sim_runner(config: EngineConfig) -> SimRunner:
            spec = config.speculative_config.num_speculative_tokens
            return SimRunner(cost_model, vocab_size=vocab, config=config, num_spec_tokens=spec)

        make_runner = make_sim_runner
    else:
        mc = EngineConfig.from_kwargs(**kwargs).model_config
        key = (mc.model, mc.device, mc.dtype)
        if key not in cache:  # loaded once, shared by every sweep point (as ModelRunner would load it)
            cache[key] = load_engine_model(*key)
        loaded, make_runner, intake = cache[key], None, None
        vocab, max_len = loaded.arch.vocab_size, loaded.arch.max_position_embeddings
    kwargs.setdefault("max_model_len", min(max_len, DEFAULT_MAX_MODEL_LEN))
    engine = build_engine(make_runner, loaded, scheduler_class(args.scheduler_cls), **kwargs)
    max_model_len = engine.config.scheduler_config.max_model_len
    if max_model_len is None:  # SchedulerConfig.__post_init__ sets it
        raise ValueError("build_point: the engine's SchedulerConfig has no max_model_len.")
    workload = load_workload(args, point, vocab, max_model_len)
    return engine, workload, intake


def run_point(args: argparse.Namespace, point: dict[str, Any], cache: dict[tuple, Any], progress: Any) -> dict:
    """Build one engine for this sweep point, run the workload, summarise the trace."""
    from minivllm.lab.metrics.summary import summarize

    engine, workload, intake = build_point(args, point, cache)
    kwargs = engine_kwargs(args, point)
    kwargs.setdefault("max_model_len", engine.config.scheduler_config.max_model_len)
    on_step = (lambda e: progress.update(len(e.trace.steps[-1].finished))) if progress is not None else None
    t0 = time.perf_counter()
    run_workload(engine, workload.requests, on_step=on_step, intake=intake)
    wall = time.perf_counter() - t0
    metrics = summarize(engine.trace).to_dict()
    metrics.update(wall_time_s=wall, requests_per_wall_s=len(workload.requests) / wall if wall > 0 else math.nan)
    config_out = {**kwargs, **{k: point.get(k, getattr(args, k)) for k in RUN_FLAGS}}
    return {"point": point, "config": config_out, "workload": workload.params, "metrics": metrics}


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    points = parse_sweeps(parser, args.sweep) or [{}]
    if args.mode == "sim":
        for name in {p.get("cost_model", args.cost_model) for p in points}:
            try:
                model = CostModel.from_preset(name)
            except ValueError as e:
                parser.error(f"--cost-model: {e}")
            try:
                with_generation(model, args.engine_generation, args.num_scheduler_steps)
            except ValueError as e:
                parser.error(
                    f"--{'num-scheduler-steps' if 'num_scheduler_steps' in str(e) else 'engine-generation'}: {e}"
                )
    elif args.engine_generation is not None or args.num_scheduler_steps is not None:
        parser.error("--engine-generation / --num-scheduler-steps price simulated steps: they need --mode sim")
    total = 0
    for point in points:  # reject bad values before any engine runs
        kwargs = engine_kwargs(args, point)
        try:
            config = EngineConfig.from_kwargs(**kwargs)
            if args.scheduler_cls == SCHEDULERS[1] and config.scheduler_config.enable_chunked_prefill:
                parser.error(f"--scheduler-cls {SCHEDULERS[1]} never splits a prompt: add --no-enable-chunked-prefill")
            max_len = kwargs.get("max_model_len") or DEFAULT_MAX_MODEL_LEN
            total += len(load_workload(args, point, 49152, max_len).requests)
        except (ValueError, OSError) as e:
            _flag_error(parser, e)
    if args.mode == "real" and args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    cache: dict[tuple, Any] = {}
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
