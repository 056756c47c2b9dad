"""Decode-step time against the memory roofline (ch. 4, §11.7).

A decode step must read every weight once plus each request's KV cache, so its
time is bounded below by ``(weight bytes + KV bytes) / memory bandwidth``. This
script times pure-decode steps at batch 1, 16 and 64 (context ``--context``
tokens each) and prints measured time, the roofline bound and their ratio.
``python -m minivllm.lab.benchmarks.decode_roofline --model FOLDER --bandwidth-gbs 4800`` (H200 HBM3e).
"""

from __future__ import annotations

import argparse
import json

import torch

from minivllm.config import resolve_auto_dtype
from minivllm.engine.arg_utils import build_engine
from minivllm.sampling_params import SamplingParams

PEAK_BANDWIDTH_GBS = {  # published HBM/GDDR peak per device name substring, GB/s (first match wins)
    "H200": 4800.0, "H100 PCIe": 2000.0, "H100": 3350.0, "A100-SXM4-80GB": 2039.0, "A100": 1555.0,
    "L40": 864.0, "A10": 600.0, "L4": 300.0, "T4": 320.0,
}  # fmt: skip


def peak_bandwidth_gbs(device_name: str) -> float | None:
    """The device's published memory bandwidth in GB/s, or None when it is not in the table."""
    return next((v for k, v in PEAK_BANDWIDTH_GBS.items() if k in device_name), None)


def decode_step_time(loaded, batch: int, context: int, steps: int, device, dtype) -> float:
    budget = max(2048, batch)
    # Early requests decode while later prompts are still being prefilled: room for those tokens too.
    max_tokens = steps + 10 + -(-batch * context // budget)
    max_model_len = context + max_tokens + 1
    engine = build_engine(
        loaded=loaded,
        model=loaded.hf_folder,
        device=str(device),
        dtype=dtype,
        max_num_seqs=max(batch, 1),
        max_num_batched_tokens=budget,
        max_model_len=max_model_len,
        num_gpu_blocks=batch * (max_model_len // 16 + 2) + 1,
    )
    g = torch.Generator().manual_seed(batch)
    for i in range(batch):
        prompt = torch.randint(3, loaded.arch.vocab_size, (context,), generator=g).tolist()
        engine.add_request(str(i), prompt, SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True))
    while any(s.prefill_tokens for s in engine.trace.steps[-1:]) or not engine.trace.steps:
        engine.step()  # finish every prefill first
    engine.step()
    times = []
    for _ in range(steps):
        engine.step()
        rec = engine.trace.steps[-1]
        assert not rec.prefill_tokens and len(rec.decode_tokens) == batch, (batch, rec)
        times.append(rec.duration)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m minivllm.lab.benchmarks.decode_roofline")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="auto", help="auto: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument(
        "--bandwidth-gbs", default="auto", help="memory bandwidth, GB/s (auto: the CUDA device's published peak)"
    )
    parser.add_argument("--output-json", help="also write the rows (and the model's bytes) to this file")
    args = parser.parse_args(argv)
    args.dtype = resolve_auto_dtype(args.dtype, torch.device(args.device).type)
    if args.bandwidth_gbs == "auto":
        name = torch.cuda.get_device_name(torch.device(args.device)) if torch.device(args.device).type == "cuda" else ""
        bandwidth = peak_bandwidth_gbs(name)
        if bandwidth is None:
            parser.error(
                f"--bandwidth-gbs auto: no published bandwidth for device {name or args.device!r}; give a number"
            )
        args.bandwidth_gbs = bandwidth
    else:
        try:
            args.bandwidth_gbs = float(args.bandwidth_gbs)
        except ValueError:
            parser.error(f"--bandwidth-gbs must be a number of GB/s or 'auto', got {args.bandwidth_gbs!r}")
        if not args.bandwidth_gbs > 0:
            parser.error(f"--bandwidth-gbs must be > 0, got {args.bandwidth_gbs}")

    from minivllm.model.loader import load_model

    loaded = load_model(args.model, args.dtype, args.device)
    elem = torch.tensor([], dtype=getattr(torch, args.dtype)).element_size()
    weight_bytes = sum(p.numel() for p in loaded.model.parameters()) * elem
    a = loaded.arch
    kv_per_token = 2 * a.num_layers * a.num_kv_heads * a.head_dim * elem
    print(
        f"{args.model} on {args.device} ({args.dtype}): weights {weight_bytes / 1e6:.0f} MB, "
        f"KV {kv_per_token / 1e3:.1f} kB/token, bandwidth {args.bandwidth_gbs:.0f} GB/s"
    )
    print(f"{'batch':>6} {'measured ms':>12} {'roofline ms':>12} {'ratio':>7}")
    rows = []
    for batch in args.batches:
        t = decode_step_time(loaded, batch, args.context, args.steps, args.device, args.dtype)
        bound = (weight_bytes + batch * (args.context + 1) * kv_per_token) / (args.bandwidth_gbs * 1e9)
        print(f"{batch:>6} {t * 1e3:>12.2f} {bound * 1e3:>12.3f} {t / bound:>7.1f}")
        rows.append({"batch": batch, "measured_ms": t * 1e3, "roofline_ms": bound * 1e3, "ratio": t / bound})
    result = {
        "model": args.model, "device": args.device, "dtype": args.dtype, "context": args.context,
        "weight_bytes": weight_bytes, "kv_bytes_per_token": kv_per_token, "bandwidth_gbs": args.bandwidth_gbs,
        "rows": rows,
    }  # fmt: skip
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
