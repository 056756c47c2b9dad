"""Offline throughput: minivllm against HF transformers, outputs checked equal (§11.9).

``python -m minivllm.lab.benchmarks.throughput`` generates for one seeded workload
(16 requests, prompts of 32-512 tokens, 32 output tokens each, greedy, EOS
ignored) three ways and prints tokens per second and the ratios:

- minivllm ``LLMEngine`` (paged KV cache, mixed prefill + decode batches);
- HF ``generate`` on static, left-padded batches of 8 (the classic way);
- HF ``generate_batch`` (transformers' own continuous batching), timed twice: its first call, which
  also builds and warms up its batching manager, and a second call that reuses the kept manager.

Each engine runs in a fresh Python process (``--same-process`` runs them all in this one, where
HF then also benefits from minivllm's process-wide malloc tuning), after a short warm-up. Every
output is compared token for token with minivllm's. Then it says where minivllm's time went:
steps that carried prompt tokens against pure decode steps (and, with ``--profile``, which
operators). ``--ablate-cpu-gemm`` adds a minivllm run with PyTorch's own GEMM instead of oneDNN.
``--repeats N`` (default 3) runs the engines N times, alternating, and reports the median speed-up (the table
shows the median run). ``--threads 1 --clock process`` measures CPU time, for a machine shared with other work.
``--dtype bfloat16`` runs minivllm and HF in bf16 (CPUs with AVX512_BF16 or AMX; outputs then agree mostly, not
by contract); ``--decode-kernel 0/1`` sets ``MINIVLLM_CPU_DECODE_KERNEL`` (the C++ decode attention; default auto).
The decode steps are set against the memory roofline: a pure decode step must read every weight once and
each request's K/V context once, ``(weight bytes + KV bytes) / bandwidth`` (as ``decode_roofline`` counts it;
the KV bytes are the mean over the run's pure decode steps, ~230 MB beside 538 MB of fp32 weights here), the
bandwidth measured in minivllm's process (the best of a few passes over a 256 MB buffer, with the engine's
threads) unless ``--bandwidth-gbs`` states it. The ratio to the weights' bytes alone is printed beside it.
A benchmark, not a test: the numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

from minivllm.engine import arg_utils
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.benchmarks.step_profile import profile_steps
from minivllm.sampling_params import SamplingParams

# "wall": elapsed time. "process": this process's CPU time, every thread: on a shared machine it leaves out the
# time other processes held the cores (with --threads 1 it is the work done; more threads add their spin-waits).
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
CLOCK = [time.perf_counter]  # the clock of this process's runs (set by _run_one)


def make_prompts(num: int, low: int, high: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (num,), generator=g).tolist()
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]


def build_engine(loaded, prompts, new_tokens, budget, device, attention_backend="auto", cpu_gemm="auto") -> LLMEngine:
    """An engine in the loaded weights' dtype with room for every request at once, warmed up by one tiny request."""
    max_len = max(map(len, prompts)) + new_tokens
    engine = arg_utils.build_engine(
        loaded=loaded,
        model=loaded.hf_folder,
        device=str(device),
        dtype=str(next(loaded.model.parameters()).dtype).removeprefix("torch."),  # the loaded weights' (fp32 here)
        cpu_gemm=cpu_gemm,
        max_num_batched_tokens=budget,
        max_num_seqs=len(prompts),
        max_model_len=max_len,
        attention_backend=attention_backend,
        num_gpu_blocks=len(prompts) * (max_len // 16 + 2) + 1,
    )
    engine.add_request("warmup", prompts[0][:16], SamplingParams(max_tokens=2, temperature=0.0))
    while engine.has_unfinished_requests():
        engine.step()
    return engine


def run_minivllm(
    loaded, prompts, new_tokens, budget, device, attention_backend="auto", cpu_gemm="auto"
) -> tuple[float, list, LLMEngine, list[float], list[int]]:
    """Seconds, outputs, the engine, each step's seconds (on ``CLOCK``) and the K/V positions its decodes read."""
    engine = build_engine(loaded, prompts, new_tokens, budget, device, attention_backend, cpu_gemm)
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    t0 = CLOCK[0]()
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    step_times, contexts = [], []
    while engine.has_unfinished_requests():
        # K/V positions the step's decodes attend to (a decode at position n reads n + 1), read before it runs
        contexts.append(sum(r.num_computed_tokens + 1 for r in engine.scheduler.running))
        s = CLOCK[0]()
        engine.step()
        step_times.append(CLOCK[0]() - s)
    elapsed = CLOCK[0]() - t0
    outputs = [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))]
    return elapsed, outputs, engine, step_times, contexts


def decode_kv_bytes(arch, element_size: int, prefill_tokens: list[int], contexts: list[int]) -> float:
    """Mean bytes of K/V a pure decode step reads (steps with no prompt tokens; ``contexts`` in positions)."""
    per_position = 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * element_size  # K and V, every layer
    decode = [c for p, c in zip(prefill_tokens, contexts) if not p]
    return per_position * sum(decode) / max(1, len(decode))


def hf_model(folder: str, device, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    hf.generation_config.eos_token_id = hf.config.eos_token_id = None  # generate exactly new_tokens
    return hf


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def run_hf_static(hf, prompts, new_tokens, batch_size, device) -> tuple[float, list]:
    from transformers import GenerationConfig

    gen = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    hf.generate(torch.tensor([prompts[0][:16]], device=device), generation_config=gen)  # warm-up
    outs = []
    sync(device)
    t0 = CLOCK[0]()
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in batch], device=device)  # left padding
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=device)
        out = hf.generate(ids, attention_mask=mask, generation_config=gen)
        outs += out[:, width:].tolist()
    sync(device)
    return CLOCK[0]() - t0, outs


@torch.inference_mode()
def run_hf_generate_batch(hf, prompts, new_tokens, device) -> tuple[float, float, list, list]:
    """Time two generate_batch calls on the workload: the first builds and warms up its manager (as a
    one-off call does, ~15 s on a CPU whatever the model), the second reuses it (steady state)."""
    from transformers import GenerationConfig

    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)  # its warning about the kept manager
    gen = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0, eos_token_id=-1)
    times, outputs = [], []
    for _ in range(2):
        sync(device)
        t0 = time.perf_counter()
        out = hf.generate_batch(prompts, generation_config=gen, progress_bar=False, persistent_manager=True)
        sync(device)
        times.append(time.perf_counter() - t0)
        by_prompt = {tuple(o.prompt_ids): o.generated_tokens for o in out.values()}
        outputs.append([list(by_prompt.get(tuple(p), [])) for p in prompts])
    hf.destroy_cached_continuous_batching_manager()
    return times[0], times[1], outputs[0], outputs[1]


def measure_bandwidth_gbs(mbytes: int = 256, passes: int = 5, device: str | torch.device = "cpu") -> float:
    """Memory read bandwidth of ``device`` in GB/s: the best of ``passes`` sums over a buffer larger than its caches."""
    buf = torch.ones(mbytes * (1 << 20) // 4, device=device)
    best = float("inf")
    for _ in range(passes):
        sync(buf.device)
        t0 = CLOCK[0]()
        buf.sum()
        sync(buf.device)
        best = min(best, CLOCK[0]() - t0)
    return buf.numel() * 4 / best / 1e9


def agreement(a: list[list[int]], b: list[list[int]]) -> str:
    same = sum(x == y for x, y in zip(a, b))
    return f"{same}/{len(a)} outputs identical"


def _decode_kernel_used(device: torch.device) -> str:
    """Whether this process's engine attended its decodes with the C++ kernel (asked after the run)."""
    from minivllm.attention import cpu_decode_kernel

    mode = cpu_decode_kernel.kernel_mode()
    return "on" if device.type == "cpu" and not cpu_decode_kernel.unavailable(mode) else "off"


def _run_one(kind: str, opts: dict) -> dict:
    """Run one engine on the seeded workload; return its time, outputs and (minivllm) step split."""
    from minivllm.model.loader import load_model
    from minivllm.worker.model_runner import ModelRunner

    if opts.get("threads"):
        torch.set_num_threads(opts["threads"])
    CLOCK[0] = CLOCKS[opts.get("clock", "wall")]
    device = torch.device(opts["device"])
    dtype = opts.get("dtype", "float32")
    loaded = load_model(opts["model"], dtype, device)
    prompts = make_prompts(opts["num_prompts"], opts["min_prompt"], opts["max_prompt"], loaded.arch.vocab_size, 0)
    n = opts["output_len"]
    if kind.startswith("minivllm"):
        gemm = "torch" if kind == "minivllm-torch-gemm" else "auto"
        t, outs, engine, step_times, contexts = run_minivllm(loaded, prompts, n, opts["budget"], device, cpu_gemm=gemm)
        runner = engine.model_runner
        if not isinstance(runner, ModelRunner):  # run_minivllm builds the real runner (it has cpu_gemm)
            raise TypeError(f"run_minivllm built a {type(runner).__name__}, not a ModelRunner.")
        steps = engine.trace.steps[-len(step_times) :]  # one record per timed step
        prompt_steps = [s for s in steps if s.prefill_tokens]
        split: dict[str, Any] = {
            "num_steps": len(steps),
            "prompt_steps": len(prompt_steps),
            "prompt_steps_s": sum(d for s, d in zip(steps, step_times) if s.prefill_tokens),
            "decode_steps_s": sum(d for s, d in zip(steps, step_times) if not s.prefill_tokens),
            "cpu_gemm": runner.cpu_gemm,
            "decode_kernel": _decode_kernel_used(device),
        }
        split["decode_step_ms"] = 1e3 * split["decode_steps_s"] / max(1, split["num_steps"] - split["prompt_steps"])
        split["weight_bytes"] = sum(p.numel() * p.element_size() for p in loaded.model.parameters())
        elem = next(loaded.model.parameters()).element_size()
        prefill = [sum(st.prefill_tokens.values()) for st in steps]
        split["kv_bytes"] = decode_kv_bytes(loaded.arch, elem, prefill, contexts)  # one per timed step
        split["bandwidth_gbs"] = opts.get("bandwidth_gbs") or measure_bandwidth_gbs(device=device)
        result = {"seconds": t, "outputs": outs, "split": split, "threads": torch.get_num_threads()}
        result["num_prompt_tokens"] = sum(map(len, prompts))
        if opts["profile"] and kind == "minivllm":
            result["profile"] = profile_steps(build_engine(loaded, prompts, n, opts["budget"], device), prompts, n)
        return result
    hf = hf_model(loaded.hf_folder, device, getattr(torch, dtype))
    if kind == "hf-static":
        t, outs = run_hf_static(hf, prompts, n, opts["hf_batch_size"], device)
        return {"seconds": t, "outputs": outs}
    t_first, t_kept, outs_first, outs_kept = run_hf_generate_batch(hf, prompts, n, device)
    return {"seconds": t_kept, "outputs": outs_kept, "first": {"seconds": t_first, "outputs": outs_first}}


def run_engines(kinds: list[str], opts: dict, same_process: bool) -> dict[str, dict]:
    if same_process:
        return {k: _run_one(k, opts) for k in kinds}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:  # a fresh interpreter per engine: no shared allocator state, caches or threads
            out = os.path.join(tmp, f"{kind}.json")
            cmd = [sys.executable, "-m", "minivllm.lab.benchmarks.throughput", "--worker", kind]
            subprocess.run([*cmd, "--worker-opts", json.dumps(opts), "--worker-out", out], check=True)
            with open(out) as f:
                results[kind] = json.load(f)
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m minivllm.lab.benchmarks.throughput", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--min-prompt", type=int, default=32)
    parser.add_argument("--max-prompt", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    parser.add_argument("--hf-batch-size", type=int, default=8)
    parser.add_argument("--skip-generate-batch", action="store_true")
    parser.add_argument("--same-process", action="store_true", help="run every engine in this process")
    parser.add_argument("--profile", action="store_true", help="operator time of one prompt and one decode step")
    parser.add_argument("--ablate-cpu-gemm", action="store_true", help="also run minivllm with cpu_gemm=torch")
    parser.add_argument("--output-json", help="also write one row per engine (seconds, tok/s, outputs) here")
    parser.add_argument("--repeats", type=int, default=3, help="run the engines this many times; median speed-up")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="minivllm's and HF's")
    parser.add_argument(
        "--decode-kernel", choices=["auto", "0", "1"], default=None, help="MINIVLLM_CPU_DECODE_KERNEL for minivllm"
    )
    parser.add_argument("--bandwidth-gbs", type=float, default=None, help="memory bandwidth (default: measured)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads of every engine")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="process: CPU time (use --threads 1)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one engine, write JSON
    parser.add_argument("--worker-opts", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        with open(args.worker_out, "w") as f:
            json.dump(_run_one(args.worker, json.loads(args.worker_opts)), f)
        return {}
    opts = dict(
        model=args.model,
        device=args.device,
        num_prompts=args.num_prompts,
        min_prompt=args.min_prompt,
        max_prompt=args.max_prompt,
        output_len=args.output_len,
        budget=args.max_num_batched_tokens,
        hf_batch_size=args.hf_batch_size,
        profile=args.profile,
        bandwidth_gbs=args.bandwidth_gbs,
        threads=args.threads,
        clock=args.clock,
        dtype=args.dtype,
    )
    if args.decode_kernel is not None:  # read by the engines' attention backend (also in the worker processes)
        os.environ["MINIVLLM_CPU_DECODE_KERNEL"] = args.decode_kernel
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    kinds = ["minivllm"] + (["minivllm-torch-gemm"] if args.ablate_cpu_gemm else []) + ["hf-static"]
    kinds += [] if args.skip_generate_batch else ["hf-generate-batch"]
    runs = [run_engines(kinds, opts, args.same_process) for _ in range(args.repeats)]
    speedups = [r["hf-static"]["seconds"] / r["minivllm"]["seconds"] for r in runs]
    res = runs[sorted(range(len(runs)), key=speedups.__getitem__)[len(runs) // 2]]  # the median run

    mini = res["minivllm"]
    split = mini["split"]
    total_out = args.num_prompts * args.output_len
    total_in = mini["num_prompt_tokens"]
    where = "one process" if args.same_process else "a fresh process each"
    where += f", {args.clock} clock"
    print(
        f"{args.num_prompts} requests, prompts {args.min_prompt}-{args.max_prompt} tokens ({total_in} in all), "
        f"{args.output_len} output tokens each, greedy, {args.dtype}; device {args.device}, torch threads "
        f"{mini['threads']}, {where}; minivllm cpu_gemm={split['cpu_gemm']}, decode kernel {split['decode_kernel']}"
    )
    names = {
        "minivllm": "minivllm",
        "minivllm-torch-gemm": "minivllm, cpu_gemm=torch",
        "hf-static": f"HF generate, static batches of {args.hf_batch_size}",
        "hf-generate-batch": "HF generate_batch, kept manager",
        "hf-generate-batch-first": "HF generate_batch, first call",
    }
    print(f"{'engine':34} {'seconds':>8} {'output tok/s':>13} {'total tok/s':>12} {'minivllm speed-up':>18}  outputs")
    if "hf-generate-batch" in res:  # its first call, which also builds the manager, gets a row of its own
        res["hf-generate-batch-first"] = res["hf-generate-batch"].pop("first")
    result, rows = {}, []
    for kind, r in res.items():
        t = r["seconds"]
        note = "reference" if kind == "minivllm" else agreement(r["outputs"], mini["outputs"])
        print(
            f"{names[kind]:34} {t:>8.2f} {total_out / t:>13.1f} {(total_in + total_out) / t:>12.1f} "
            f"{t / mini['seconds']:>17.2f}x  {note}"
        )
        result[names[kind]] = t
        rows.append({"engine": names[kind], "seconds": t, "output_tok_s": total_out / t,
                     "minivllm_speedup": t / mini["seconds"], "outputs": note,
                     "identical_to_minivllm": sum(x == y for x, y in zip(r["outputs"], mini["outputs"]))})  # fmt: skip
    print(
        f"minivllm: {split['num_steps']} steps; with prompt tokens: {split['prompt_steps']} "
        f"({split['prompt_steps_s']:.2f} s), pure decode: {split['num_steps'] - split['prompt_steps']} "
        f"({split['decode_steps_s']:.2f} s)"
    )
    bw = split["bandwidth_gbs"] * 1e9
    roofline_ms = 1e3 * (split["weight_bytes"] + split["kv_bytes"]) / bw
    print(
        f"decode step {split['decode_step_ms']:.1f} ms; memory roofline {roofline_ms:.1f} ms "
        f"(weights {split['weight_bytes'] / 1e6:.0f} MB + the KV cache its decodes read, "
        f"{split['kv_bytes'] / 1e6:.0f} MB on average, / {split['bandwidth_gbs']:.1f} GB/s"
        f"{' stated' if args.bandwidth_gbs else ' measured'}): {split['decode_step_ms'] / roofline_ms:.2f}x the "
        f"roofline ({split['decode_step_ms'] / (1e3 * split['weight_bytes'] / bw):.2f}x the weights' bytes alone)"
    )
    if args.repeats > 1:
        each = ", ".join(
            f"{x:.2f}x ({sum(a == b for a, b in zip(r['hf-static']['outputs'], r['minivllm']['outputs']))}/"
            f"{args.num_prompts} identical)"
            for x, r in zip(speedups, runs)
        )
        median = sorted(speedups)[len(runs) // 2]
        print(f"speed-up over HF static batches, {args.repeats} runs: {each}; median {median:.2f}x")
    for label, groups in mini.get("profile", {}).items():
        total = sum(groups.values())
        ranked = sorted(groups.items(), key=lambda x: -x[1])
        parts = ", ".join(f"{g} {ms:.0f} ms ({ms / total:.0%})" for g, ms in ranked)
        print(f"  {label}: {total:.0f} ms of operators: {parts}")
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump({"options": opts, "num_prompt_tokens": total_in, "rows": rows, "split": split}, f, indent=1)
    return result


if __name__ == "__main__":
    main()
