"""Fit a cost-model preset to real ModelRunner steps on this machine (§11.7).

``python -m minivllm.lab.sim.calibrate --calibrate OUT.json`` runs repeated offline scenes on the real
model, takes each step's median time, and fits the coefficients with
:func:`minivllm.lab.sim.fit.calibrate` (held-out error reported in the preset's ``meta``). The fit
records the machine it was measured on in ``meta["fingerprint"]`` (:mod:`minivllm.lab.sim.fingerprint`).

``python -m minivllm.lab.sim.calibrate --local`` is the same measurement at one torch thread timed in process
CPU time, written to this machine's cache (:mod:`minivllm.lab.sim.local_fit`), where ``bench --mode sim`` finds it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.engine.arg_utils import build_engine
from minivllm.lab.sim.cost_model import PRESET_DIR, CostModel, StepSample, StepShape, shapes_from_steps
from minivllm.lab.sim.fingerprint import default_clock, machine_fingerprint
from minivllm.lab.sim.fit import calibrate
from minivllm.lab.sim.local_fit import local_fit_path

BUSY_LOAD = 0.75  # load average above this run's own threads: something else was running (warned)


def calibration_scenes() -> list[dict[str, Any]]:
    """Offline scenes (all requests at t=0) covering decode batches of 1..32 at short and long contexts,
    prefill chunks of 32..2048 tokens after 0..1200 cached tokens, and mixed steps.

    The last scene is what a server runs most under a conversational load: 2048-token steps (the default
    budget) of prompt chunks with decodes riding along, then a decode batch of 16 requests at ~1,000-token
    contexts that shrinks as they finish (staggered output lengths). Without it the batches of many requests
    all had short contexts and those with long contexts had 4 requests, so the per-request and per-KV-byte
    costs were told apart only by extrapolation (two fits on one machine disagreed 2x on the per-request
    cost and priced such steps 5% and 18% low). Each request has its own context: a shared prefix (cheap to
    prefill) is read from the CPU cache, one layer of it at a time, and prices KV reads too low. Known misfit:
    a server's decode batches mix lengths, and the torch backend gathers a decode group's keys padded to its
    longest request (``_decode_groups`` in :mod:`minivllm.attention.torch_backend`), which the cost model's KV
    bytes (summed contexts) do not see: such steps come out ~10% low in ``minivllm.lab.benchmarks.cpu_sim_check``
    (a scene of spread lengths moved the error from ITL to E2E instead of removing it)."""
    scenes: list[dict[str, Any]] = []
    for n, prompt, out in ((1, 64, 8), (4, 512, 10), (16, 128, 8), (32, 48, 6), (4, 1024, 4)):
        scenes.append(dict(budget=1024, seqs=n, prompts=[prompt + 7 * i for i in range(n)], max_tokens=[out] * n))
    for budget in (32, 256):  # a long prompt chunked while short requests decode alongside
        scenes.append(dict(budget=budget, seqs=8, prompts=[1200, 40, 60, 80, 100], max_tokens=[4, 16, 14, 12, 10]))
    n = 16  # long-context decode batches after 2048-token mixed steps
    scenes.append(
        dict(budget=2048, seqs=n, prompts=[1024 + 7 * i for i in range(n)], max_tokens=[12 + i for i in range(n)])
    )
    return scenes


class RepeatingRunner:
    """Wraps the real ModelRunner: runs every step ``repeats`` times back to back, restoring the runner's
    per-request mirror in between (greedy sampling, so the repeats are identical), and keeps the times
    read from ``clock`` (wall time, or ``time.process_time``: CPU time, robust to other processes when
    torch runs one thread). A step of more than ``once_above`` tokens runs once: seconds long, it is the
    costliest to repeat and the least noisy in relative terms."""

    def __init__(
        self, runner: Any, repeats: int, clock: Callable[[], float] = time.perf_counter, once_above: int = 1024
    ) -> None:
        self.runner, self.repeats, self.timer, self.once_above = runner, repeats, clock, once_above
        self.times: list[list[float]] = []

    def __getattr__(self, name: str) -> Any:  # loaded, device, determine_num_blocks, initialize_kv_cache
        return getattr(self.runner, name)

    def execute_model(self, out: SchedulerOutput) -> ModelRunnerOutput:
        saved = {r: (s, list(s.token_ids), list(s.block_ids)) for r, s in self.runner.requests.items()}
        times = []
        for i in range(self.repeats if sum(out.num_scheduled_tokens.values()) <= self.once_above else 1):
            if i:
                for state, tokens, blocks in saved.values():
                    state.token_ids, state.block_ids = list(tokens), list(blocks)
                self.runner.restore_requests({r: state for r, (state, _, _) in saved.items()})
            t0 = self.timer()
            result = self.runner.execute_model(out)
            times.append(self.timer() - t0)
        self.times.append(times)
        return result


def measure_real_steps(
    loaded: Any,
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
    seed: int = 0,
    loads: list[float] | None = None,
) -> list[tuple[StepShape, list[float]]]:
    """Every scene's steps on the real ModelRunner, each step timed ``repeats`` times: (shape, times).
    ``loads`` (if given) gets the 1-minute load average after each scene."""
    import random

    from minivllm.sampling_params import SamplingParams
    from minivllm.worker.model_runner import ModelRunner

    measured = []
    for i, sc in enumerate(calibration_scenes()):
        rng = random.Random(seed + i)
        engine = build_engine(
            lambda config: RepeatingRunner(ModelRunner(config, loaded), repeats, clock),
            max_num_batched_tokens=sc["budget"],
            max_num_seqs=sc["seqs"],
            max_model_len=max(sc["prompts"]) + 64,
            enable_prefix_caching=False,
        )
        runner = engine.model_runner  # the RepeatingRunner: its times
        assert isinstance(runner, RepeatingRunner)
        for j, (p, m) in enumerate(zip(sc["prompts"], sc["max_tokens"])):
            ids = [rng.randrange(loaded.arch.vocab_size) for _ in range(p)]
            params = SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True)
            engine.add_request(f"s{i}r{j}", ids, params, arrival_time=0.0)
        while engine.has_unfinished_requests():
            engine.step()
        shapes = shapes_from_steps(engine.trace.steps)
        measured += [(shape, times) for shape, times in zip(shapes, runner.times) if shape]
        if loads is not None:
            loads.append(round(os.getloadavg()[0], 2))
        print(f"scene {i + 1}/{len(calibration_scenes())}: {len(shapes)} steps x {repeats}", flush=True)
    return measured


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Calibrate a CPU cost-model preset from real ModelRunner steps.")
    parser.add_argument("--calibrate", metavar="OUT.json", help="default: the package's presets/cpu_MODEL.json")
    parser.add_argument(
        "--local",
        action="store_true",
        help="write this machine's fit to its cache ($MINIVLLM_CACHE/sim), where bench --mode sim finds it; "
        "default --threads 1 --clock cpu",
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--repeats", type=int, default=3, help="times each step is run (back to back)")
    parser.add_argument("--statistic", choices=("median", "min"), default="median", help="over the repeats")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    parser.add_argument("--clock", choices=("wall", "cpu"), help="cpu: process time (1 thread); default wall")
    parser.add_argument("--refit", metavar="PRESET", help="refit on the times stored in a preset; runs nothing")
    args = parser.parse_args(argv)
    if args.local and args.calibrate:
        parser.error("--local writes to this machine's cache: give it or --calibrate OUT.json, not both")
    if args.local and args.refit:
        parser.error("--local measures this machine: it cannot be combined with --refit")
    if args.local:
        args.threads = args.threads or 1
        args.clock = args.clock or default_clock(args.threads)
    args.clock = args.clock or "wall"
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.refit:
        old = CostModel.from_preset(args.refit)
        measured = [([tuple(x) for x in shape], times) for shape, _, times in old.meta["samples"]]
        base, meta = CostModel(**{**old.to_dict(), "meta": {}}), dict(old.meta)
    else:
        from minivllm.model.loader import load_model

        loaded = load_model(args.model)
        t0 = time.perf_counter()
        if args.clock == "cpu" and torch.get_num_threads() != 1:
            parser.error("--clock cpu sums the CPU time of all threads: use it with --threads 1")
        loads: list[float] = []
        measured = measure_real_steps(
            loaded, args.repeats, time.process_time if args.clock == "cpu" else time.perf_counter, loads=loads
        )
        a = loaded.arch
        base = CostModel(
            name=f"cpu_{Path(args.model).name}",
            kv_bytes_per_token=2 * a.num_layers * a.num_kv_heads * a.head_dim * 4,  # float32 on CPU
            kv_cache_bytes=1 << 30,  # ModelRunner's default CPU KV budget
            vocab_size=a.vocab_size,
            max_model_len=a.max_position_embeddings,
        )
        meta = {
            "description": f"{args.model} on this machine's CPU: float32, torch attention backend, real steps",
            "date": time.strftime("%Y-%m-%d"),
            "machine": f"{_cpu_name()}, {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}",
            "torch_threads": torch.get_num_threads(),
            "clock": args.clock,
            "torch": torch.__version__,
            "repeats": args.repeats,
            "load_average_after": os.getloadavg()[0],
            "load_average_by_scene": loads,
            "measure_seconds": round(time.perf_counter() - t0, 1),
            "command": "python -m minivllm.lab.sim.calibrate " + shlex.join(sys.argv[1:] if argv is None else argv),
            "fingerprint": machine_fingerprint(torch.get_num_threads(), args.clock).to_dict(),
            "refit": "python -m minivllm.lab.sim.calibrate --refit cpu_smollm2 --statistic min --calibrate OUT.json",
        }
    pick = statistics.median if args.statistic == "median" else min
    samples = [StepSample(shape, pick(times)) for shape, times in measured]
    model, report = calibrate(samples, base)
    meta["method"] = (
        f"offline scenes (calibration_scenes), each step run {len(measured[0][1])} times back to back "
        "(steps of more than 1024 tokens once), "
        f"{args.statistic} of the times; fitted (least absolute relative error, IRLS) on a random 70% of the steps, "
        "errors on the other 30%. samples = [shape, fitted duration, all times]"
    )
    meta["samples"] = [[s.shape, s.duration, times] for s, (_, times) in zip(samples, measured)]
    model.meta = {**meta, "statistic": args.statistic, "calibration": report.to_dict()}
    if args.local:
        out = local_fit_path(model.name, machine_fingerprint(torch.get_num_threads(), args.clock))
        out.parent.mkdir(parents=True, exist_ok=True)
    else:
        out = Path(args.calibrate or PRESET_DIR / f"{model.name}.json")
    model.save(out)
    print(f"wrote {out}")
    print(f"{len(samples)} steps; held-out median APE {report.median_ape:.1f}%, p90 {report.p90_ape:.1f}%")
    print({k: v for k, v in model.to_dict().items() if k != "meta"})
    busy = max(meta.get("load_average_by_scene") or [0.0])
    if busy > BUSY_LOAD + meta.get("torch_threads", 1):
        print(
            f"warning: the machine was busy while measuring (1-minute load average up to {busy:.1f}, this run "
            f"adds {meta.get('torch_threads', 1)}). Other processes slow a step even in CPU time (they share the "
            "caches and memory bandwidth, or the core itself on SMT siblings): this fit may price steps high. "
            "Measure again when the machine is quiet.",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
