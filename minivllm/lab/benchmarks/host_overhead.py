"""Host overhead of one decode step: schedule, input preparation, model, sampling, update (§11.6, §11.9).

On a GPU a small model's kernels are quick, so the host work around them (Python scheduling, building
the flat batch's tensors, sampling bookkeeping, output processing) sets the step time. §11.10 warns
that "过小会增加 step 数和调度/kernel 开销" (too small a chunk adds steps and scheduling / kernel
overhead): this benchmark measures that per-step overhead directly. vLLM's counterpart is
``vllm/v1/worker/gpu_model_runner.py``: its *persistent batch* (``InputBatch``, updated in place by
``_update_states``) and ``_prepare_inputs`` (numpy over pinned CPU buffers, one copy to the device)
exist because rebuilding the inputs in Python each step costs more than a small model's forward.

``python -m minivllm.lab.benchmarks.host_overhead [--model FOLDER|smollm2] [--num-layers 1] [--device cpu|cuda]
[--batches 1 16 64 256] [--context 128] [--steps 30] [--output-json PATH]``

Default model: random weights with SmolLM2-135M's shapes but one layer
(``random_model.save_random_smollm2_like``), so the model's own compute is small and the host work
shows. For each batch size the engine is filled with ``batch`` requests of ``context`` prompt tokens,
run until all decode, and ``steps`` pure decode steps are timed. Each step is split by timers wrapped
around the engine's real (bound) methods; a part's time is *exclusive* (a timed call inside another
counts only for the inner part):

- schedule: ``Scheduler.schedule``;
- input preparation: the runner's own work in ``execute_model`` (its request mirror, input ids,
  attention metadata, copies to the device) and the attention backend's per-step ``prepare``;
- model: ``ModelRunner._forward`` (forward + logits; on CUDA synchronised before the clock is read);
- sampling: ``ModelRunner._sample`` (the Sampler and the per-request logits work);
- update: ``Scheduler.update_from_output`` and the engine's output processing (trace, metrics, stop
  checks, detokenize);
- other: the step's wall time less all of the above (``LLMEngine.step``'s own loops, the clock, the
  timers themselves), so the parts add up to the step.

Numbers are medians over the timed steps, in ms. A benchmark, not a test: they depend on the machine
and on what else runs on it.

``--async-scheduling`` (vLLM 0.10's async scheduling, ``minivllm.core.async_scheduler``) then times the same
pure decode steps on an engine with ``async_scheduling=True`` (wall clock, no per-part timers: the parts run
on two threads), alternating synchronous and async engines for ``--rounds`` rounds. Two measures of the host
time hidden: ``sync - async`` (wall ms per step; on a loaded machine, noisy), and, steadier, the share of the
engine thread's host work (``schedule``, ``update_from_output``, output processing, the trace: wall intervals)
that ran while the worker thread was inside ``execute_model`` (``overlap``, measured in the async run itself).
Only the engine thread's part can be hidden (``sch+upd`` in the synchronous run); the runner's own host work
(input preparation, sampling) stays on the worker thread, in series with the model, as in vLLM 0.10.
The load average of the machine is printed beside the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from minivllm.engine import arg_utils
from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams

PARTS = ("schedule", "input_prep", "model", "sampling", "update", "other")
WARMUP_STEPS = 3
# "wall": elapsed time. "thread": this thread's CPU time, which leaves out the time another process held the
# core: steadier on a shared machine, but only meaningful on CPU with --threads 1 (no GPU waits, no helpers).
CLOCKS: dict[str, Callable[[], int]] = {"wall": time.perf_counter_ns, "thread": time.thread_time_ns}
BUDGET = 4096  # tokens per step while filling (the first requests decode while the last ones prefill)


def max_new_tokens(batch: int, context: int, steps: int) -> int:
    """Enough for the first request: it decodes from the first fill step through the timed ones."""
    return -(-batch * context // max(batch, BUDGET)) + WARMUP_STEPS + steps + 2


@dataclass
class Row:
    """Median ms per step of one batch size, by part; ``host_pct`` = everything but the model."""

    batch: int
    steps: int
    total_ms: float
    schedule_ms: float
    input_prep_ms: float
    model_ms: float
    sampling_ms: float
    update_ms: float
    other_ms: float
    host_pct: float


class StepTimer:
    """Exclusive time per part: wrapped calls nest, and a call's time is taken out of its caller's part."""

    def __init__(self, sync: Callable[[], None] | None = None, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.sync, self.clock = sync, clock
        self.times: dict[str, int] = dict.fromkeys(PARTS, 0)  # ns in the current step ("other": measure's)
        self._stack: list[int] = []  # ns spent in timed children of each open call

    def wrap(self, obj: Any, name: str, part: str, sync: bool = False) -> None:
        """Replace ``obj.name`` (a bound method) by a timed one, as an instance attribute."""
        method = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(0)
            t0 = self.clock()
            try:
                result = method(*args, **kwargs)
                if sync and self.sync is not None:
                    self.sync()
                return result
            finally:
                elapsed = self.clock() - t0
                children = self._stack.pop()
                self.times[part] += elapsed - children
                if self._stack:
                    self._stack[-1] += elapsed

        setattr(obj, name, timed)

    def reset(self) -> None:
        self.times = dict.fromkeys(PARTS, 0)


def instrument(engine: LLMEngine, clock: Callable[[], int] = time.perf_counter_ns) -> StepTimer:
    """Wrap the engine's, scheduler's and runner's methods that make up one step (the runner must be the
    real ``ModelRunner``)."""
    runner: Any = engine.model_runner
    timer = StepTimer(runner.synchronize, clock)
    timer.wrap(engine.scheduler, "schedule", "schedule")
    timer.wrap(runner, "execute_model", "input_prep")
    timer.wrap(runner.attn_backend, "prepare", "input_prep")
    timer.wrap(runner, "_forward", "model", sync=True)
    timer.wrap(runner, "_sample", "sampling")
    timer.wrap(engine.scheduler, "update_from_output", "update")
    timer.wrap(engine.output_processor, "process_outputs", "update")
    timer.wrap(engine.trace, "record_step", "update")
    return timer


def make_engine(
    loaded: Any, batch: int, context: int, steps: int, device: str, dtype: str, async_scheduling: bool = False
) -> LLMEngine:
    """An engine with room for ``batch`` requests of ``context + steps`` tokens, warmed up by one request."""
    max_len = context + max_new_tokens(batch, context, steps) + 8
    engine = arg_utils.build_engine(
        loaded=loaded,
        model=loaded.hf_folder,
        device=device,
        dtype=dtype,
        max_num_batched_tokens=max(batch, BUDGET),
        max_num_seqs=batch,
        max_model_len=max_len,
        num_gpu_blocks=batch * (max_len // 16 + 2) + 1,
        async_scheduling=async_scheduling,
    )
    engine.add_request("warmup", list(range(3, 19)), SamplingParams(max_tokens=2, temperature=0.0))
    while engine.has_unfinished_requests():
        engine.step()
    return engine


def _fill_to_pure_decode(engine: LLMEngine, batch: int, context: int, steps: int, seed: int) -> None:
    """Add ``batch`` greedy requests of ``context`` random tokens, step until all decode, then warm up."""
    vocab = engine.vocab_size or 1000
    g = torch.Generator().manual_seed(seed)
    params = SamplingParams(max_tokens=max_new_tokens(batch, context, steps), temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request(f"r{i}", torch.randint(3, vocab, (context,), generator=g).tolist(), params)
    while not _pure_decode(engine, batch):
        engine.step()
    for _ in range(WARMUP_STEPS):
        engine.step()


def measure(engine: LLMEngine, batch: int, context: int, steps: int, clock: str = "wall", seed: int = 0) -> Row:
    """Fill with ``batch`` requests, run until all decode, time ``steps`` pure decode steps on ``clock``."""
    _fill_to_pure_decode(engine, batch, context, steps, seed)
    now = CLOCKS[clock]
    timer = instrument(engine, now)
    per_step: list[dict[str, int]] = []
    for _ in range(steps):
        timer.reset()
        t0 = now()
        engine.step()
        total = now() - t0
        assert _pure_decode(engine, batch), "a timed step was not a pure decode step of the whole batch"
        times = dict(timer.times)
        times["other"] = total - sum(times[p] for p in PARTS if p != "other")
        per_step.append(times | {"total": total})
    ms = {p: statistics.median(s[p] for s in per_step) / 1e6 for p in (*PARTS, "total")}
    total_ms = ms["total"]
    host = 100.0 * (1.0 - ms["model"] / total_ms) if total_ms > 0 else 0.0
    schedule, input_prep, model, sampling, update, other = (ms[p] for p in PARTS)
    return Row(batch, steps, total_ms, schedule, input_prep, model, sampling, update, other, host)


def _pure_decode(engine: LLMEngine, batch: int) -> bool:
    last = engine.trace.steps[-1] if engine.trace.steps else None
    return last is not None and not last.prefill_tokens and len(last.decode_tokens) == batch


def load(model: str | None, num_layers: int, device: str, dtype: str, tmp: str) -> Any:
    """The model: a folder, ``smollm2``, or (None) a random SmolLM2-shaped one with ``num_layers`` layers."""
    from minivllm.config import resolve_auto_dtype
    from minivllm.lab.benchmarks.random_model import save_random_smollm2_like
    from minivllm.model.loader import load_model, resolve_dtype

    folder = model or save_random_smollm2_like(tmp, num_layers=num_layers)
    torch_dtype = resolve_dtype(resolve_auto_dtype(dtype, torch.device(device).type))
    return load_model(folder, torch_dtype, torch.device(device))


def run(
    model: str | None = None,
    num_layers: int = 1,
    device: str = "cpu",
    dtype: str = "auto",
    batches: tuple[int, ...] = (1, 16, 64, 256),
    context: int = 128,
    steps: int = 30,
    loaded: Any = None,
    clock: str = "wall",
) -> list[Row]:
    """One Row per batch size, each on a fresh engine (the loaded model is shared)."""
    with tempfile.TemporaryDirectory() as tmp:
        loaded = loaded or load(model, num_layers, device, dtype, tmp)
        rows = []
        for batch in batches:
            engine = make_engine(loaded, batch, context, steps, device, dtype)
            rows.append(measure(engine, batch, context, steps, clock))
            del engine
    return rows


@dataclass
class OverlapRow:
    """Wall ms per pure decode step, synchronous and async engines, one round."""

    batch: int
    round: int
    sync_ms: float
    sync_host_ms: float  # the synchronous step less its model part
    sync_engine_ms: float  # of which the engine thread's share (schedule + update): what async can hide
    async_ms: float
    async_host_ms: float  # the engine thread's host work per step in the async run
    overlap_pct: float  # of which ran while a step executed on the worker thread

    @property
    def hidden_ms(self) -> float:
        return self.sync_ms - self.async_ms


def _record_intervals(obj: Any, name: str, out: list[tuple[float, float]]) -> None:
    """Replace ``obj.name`` by a wrapper appending each call's (start, end) wall time to ``out``."""
    method = getattr(obj, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            out.append((t0, time.perf_counter()))

    setattr(obj, name, recorded)


def _overlap(host: list[tuple[float, float]], busy: list[tuple[float, float]]) -> float:
    """Seconds of the ``host`` intervals covered by the (disjoint) ``busy`` intervals."""
    return sum(max(0.0, min(h1, b1) - max(h0, b0)) for h0, h1 in host for b0, b1 in busy if b0 < h1 and h0 < b1)


def measure_async(engine: LLMEngine, batch: int, context: int, steps: int, seed: int = 0) -> tuple[float, float, float]:
    """``measure``'s workload on an async engine: median wall ms per step (one executed step per ``step()``),
    the engine thread's host ms per step, and the % of it that overlapped a step running on the worker."""
    _fill_to_pure_decode(engine, batch, context, steps, seed)
    host: list[tuple[float, float]] = []
    busy: list[tuple[float, float]] = []
    for obj, name in ((engine.scheduler, "schedule"), (engine.scheduler, "update_from_output")):
        _record_intervals(obj, name, host)
    _record_intervals(engine.output_processor, "process_outputs", host)
    _record_intervals(engine.trace, "record_step", host)
    _record_intervals(engine.model_runner, "execute_model", busy)  # called on the worker thread
    times = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        engine.step()
        times.append(time.perf_counter_ns() - t0)
        assert _pure_decode(engine, batch), "a timed step was not a pure decode step of the whole batch"
    while engine.has_unfinished_requests():  # the worker's intervals are complete once nothing is in flight
        engine.step()
    host_s = sum(h1 - h0 for h0, h1 in host)
    pct = 100.0 * _overlap(host, busy) / host_s if host_s > 0 else 0.0
    return statistics.median(times) / 1e6, 1e3 * host_s / steps, pct


def run_overlap(loaded: Any, batches: tuple[int, ...], context: int, steps: int, device: str, dtype: str, rounds: int):
    """Per batch size and round: a synchronous engine (timed by parts), then an async one (wall clock)."""
    rows = []
    for batch in batches:
        for r in range(rounds):
            sync_engine = make_engine(loaded, batch, context, steps, device, dtype)
            sync_row = measure(sync_engine, batch, context, steps)
            del sync_engine
            async_engine = make_engine(loaded, batch, context, steps, device, dtype, async_scheduling=True)
            async_ms, async_host_ms, overlap_pct = measure_async(async_engine, batch, context, steps)
            del async_engine
            sync_host = sync_row.total_ms - sync_row.model_ms
            engine_ms = sync_row.schedule_ms + sync_row.update_ms
            rows.append(
                OverlapRow(batch, r, sync_row.total_ms, sync_host, engine_ms, async_ms, async_host_ms, overlap_pct)
            )
    return rows


def format_overlap(rows: list[OverlapRow]) -> str:
    head = f"{'batch':>5} {'round':>5} {'sync':>8} {'host':>8} {'sch+upd':>8} {'async':>8} {'hidden':>8}"
    lines = [head + f" {'a. host':>8} {'overlap':>7}", "-" * 75]
    for r in rows:
        values = (r.sync_ms, r.sync_host_ms, r.sync_engine_ms, r.async_ms, r.hidden_ms, r.async_host_ms)
        lines.append(f"{r.batch:>5} {r.round:>5} " + " ".join(f"{v:8.3f}" for v in values) + f" {r.overlap_pct:6.1f}%")
    return "\n".join(lines)


def format_table(rows: list[Row]) -> str:
    head = f"{'batch':>5} {'total':>7} {'sched':>7} {'inputs':>7} {'model':>7} {'sample':>7} {'update':>7}"
    lines = [head + f" {'other':>7} {'% host':>6}", "-" * 66]
    for r in rows:
        parts = (r.total_ms, r.schedule_ms, r.input_prep_ms, r.model_ms, r.sampling_ms, r.update_ms, r.other_ms)
        lines.append(f"{r.batch:>5} " + " ".join(f"{v:7.3f}" for v in parts) + f" {r.host_pct:5.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--model", default=None, help="HF folder or 'smollm2' (default: random SmolLM2-shaped)")
    ap.add_argument("--num-layers", type=int, default=1, help="layers of the random model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--context", type=int, default=128, help="prompt tokens per request")
    ap.add_argument("--steps", type=int, default=30, help="timed decode steps per batch size")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1: no OpenMP waits on a busy box)")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="thread: CPU time of this thread")
    ap.add_argument("--output-json", default=None)
    ap.add_argument("--async-scheduling", action="store_true", help="also time async engines: the host time hidden")
    ap.add_argument("--rounds", type=int, default=2, help="with --async-scheduling: sync/async rounds per batch")
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    batches = tuple(args.batches)
    if args.async_scheduling:
        with tempfile.TemporaryDirectory() as tmp:
            loaded = load(args.model, args.num_layers, args.device, args.dtype, tmp)
            overlap = run_overlap(loaded, batches, args.context, args.steps, args.device, args.dtype, args.rounds)
        load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"wall ms per decode step (median of {args.steps}), device {args.device}, "
            f"{torch.get_num_threads()} CPU threads, load average {load_avg} (1, 5, 15 min) on {os.cpu_count()} CPUs"
        )
        print(format_overlap(overlap))
        if args.output_json:
            with open(args.output_json, "w") as f:
                json.dump({"load_average": os.getloadavg(), "rows": [asdict(r) for r in overlap]}, f, indent=2)
        return []
    rows = run(
        args.model, args.num_layers, args.device, args.dtype, batches, args.context, args.steps, clock=args.clock
    )
    threads = torch.get_num_threads()
    print(
        f"ms per decode step (median of {args.steps}, {args.clock} clock), device {args.device}, {threads} CPU threads"
    )
    print(format_table(rows))
    if args.output_json:
        with open(args.output_json, "w") as f:
            meta = {"device": args.device, "threads": threads, "clock": args.clock, "steps": args.steps}
            json.dump({**meta, "rows": [asdict(r) for r in rows]}, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
