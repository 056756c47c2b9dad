"""Decode step time, eager vs CUDA graphs, at batch 1 / 8 / 64, and whether both give the same tokens (§11.7).

A small model's decode step on a datacenter GPU is launch-bound (``minivllm.worker.cuda_graphs``): graphs
(``enforce_eager=False``, vLLM's default) replay the whole forward with one launch. For each batch size this
runs the same greedy requests twice, eager and with graphs, times the pure-decode engine steps (median,
schedule + forward + sampling + update, the device synchronised) and compares every output token.
Where graphs cannot be captured (a CPU, a backend other than triton) the runner says why and runs eagerly;
the row says so. ``python -m minivllm.lab.benchmarks.decode_graphs --model FOLDER --device cuda``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import torch

from minivllm.config import resolve_auto_dtype
from minivllm.engine.arg_utils import build_engine, load_engine_model
from minivllm.sampling_params import SamplingParams


def decode_run(loaded: Any, batch: int, eager: bool, prompt_len: int, steps: int, device: str, dtype: str) -> dict:
    """One engine, ``batch`` greedy requests: the median pure-decode step (s), the tokens, and the graphs' state."""
    max_model_len = prompt_len + steps + 1
    engine = build_engine(
        loaded=loaded, model=loaded.hf_folder, device=device, dtype=dtype, enforce_eager=eager,
        attention_backend="triton" if device.startswith("cuda") else "auto", max_num_seqs=batch,
        max_num_batched_tokens=max(2048, prompt_len), max_model_len=max_model_len,
        num_gpu_blocks=batch * (max_model_len // 16 + 2) + 1,
    )  # fmt: skip
    g = torch.Generator().manual_seed(batch)
    for i in range(batch):
        prompt = torch.randint(3, loaded.arch.vocab_size, (prompt_len,), generator=g).tolist()
        engine.add_request(str(i), prompt, SamplingParams(max_tokens=steps, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    decodes = [s.end - s.start for s in engine.trace.steps if not s.prefill_tokens and len(s.decode_tokens) == batch]
    runner: Any = engine.model_runner
    return {
        "step_s": statistics.median(decodes[2:] or decodes),  # the first decode steps warm caches up
        "tokens": [engine.outputs[str(i)].outputs[0].token_ids for i in range(batch)],
        "graphs": runner.decode_graphs is not None,
        "eager_reason": runner.eager_reason,
    }


def compare(model: str, batches: list[int], prompt_len: int, steps: int, device: str, dtype: str) -> list[dict]:
    dtype = resolve_auto_dtype(dtype, device.split(":")[0])
    loaded = load_engine_model(model, device, dtype)
    rows = []
    for batch in batches:
        eager = decode_run(loaded, batch, True, prompt_len, steps, device, dtype)
        graphs = decode_run(loaded, batch, False, prompt_len, steps, device, dtype)
        same = sum(a == b for a, b in zip(eager["tokens"], graphs["tokens"]))
        rows.append({
            "batch": batch, "eager_ms": eager["step_s"] * 1e3, "graphs_ms": graphs["step_s"] * 1e3,
            "speedup": eager["step_s"] / graphs["step_s"], "identical": same, "requests": batch,
            "captured": graphs["graphs"], "eager_reason": graphs["eager_reason"],
        })  # fmt: skip
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=32, help="output tokens per request (decode steps)")
    p.add_argument("--output-json", default=None)
    args = p.parse_args(argv)
    rows = compare(args.model, args.batches, args.prompt_len, args.steps, args.device, args.dtype)
    print(f"{'batch':>6} {'eager ms':>9} {'graphs ms':>10} {'speedup':>8} {'same tokens':>12}")
    for r in rows:
        why = "" if r["captured"] else f" (eager: {r['eager_reason']})"
        print(f"{r['batch']:>6} {r['eager_ms']:>9.2f} {r['graphs_ms']:>10.2f} {r['speedup']:>7.2f}x"
              f" {r['identical']:>5}/{r['requests']:<6}{why}")  # fmt: skip
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump({"device": args.device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
