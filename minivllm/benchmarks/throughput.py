"""Offline throughput: minivllm against HF transformers, outputs checked equal (§11.9).

``python -m minivllm.benchmarks.throughput`` generates for one seeded workload
(16 requests, prompts of 32-512 tokens, 32 output tokens each, greedy, EOS
ignored) three ways and prints tokens per second and the ratios:

- minivllm ``LLMEngine`` (paged KV cache, mixed prefill + decode batches);
- HF ``generate`` on static, left-padded batches of 8 (the classic way);
- HF ``generate_batch`` (transformers' own continuous batching).

Every output is compared token for token with minivllm's. A benchmark, not a
test: the numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import time

import torch

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams


def make_prompts(num: int, low: int, high: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (num,), generator=g).tolist()
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]


def run_minivllm(loaded, prompts, new_tokens, budget, device, attention_backend="auto") -> tuple[float, list, object]:
    from minivllm.executor.model_runner import ModelRunner

    max_len = max(map(len, prompts)) + new_tokens
    config = EngineConfig.from_kwargs(
        model=loaded.hf_folder,
        device=str(device),
        max_num_batched_tokens=budget,
        max_num_seqs=len(prompts),
        max_model_len=max(max_len, 1024),
        attention_backend=attention_backend,
        num_gpu_blocks=len(prompts) * (max_len // 16 + 2) + 1,
    )
    engine = LLMEngine(config, executor=ModelRunner(config, loaded))
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    engine.add_request("warmup", prompts[0][:16], SamplingParams(max_tokens=2, temperature=0.0))
    while engine.has_unfinished_requests():
        engine.step()
    t0 = engine.clock.now()
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    while engine.has_unfinished_requests():
        engine.step()
    elapsed = engine.clock.now() - t0
    return elapsed, [engine.outputs[str(i)].token_ids for i in range(len(prompts))], engine


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
    outs = []
    sync(device)
    t0 = time.perf_counter()
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in batch], device=device)  # left padding
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=device)
        out = hf.generate(ids, attention_mask=mask, generation_config=gen)
        outs += out[:, width:].tolist()
    sync(device)
    return time.perf_counter() - t0, outs


@torch.inference_mode()
def run_hf_generate_batch(hf, prompts, new_tokens, device) -> tuple[float, list]:
    from transformers import GenerationConfig

    gen = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0, eos_token_id=-1)
    sync(device)
    t0 = time.perf_counter()
    out = hf.generate_batch(prompts, generation_config=gen, progress_bar=False)
    sync(device)
    elapsed = time.perf_counter() - t0
    by_prompt = {tuple(o.prompt_ids): o.generated_tokens for o in out.values()}
    return elapsed, [list(by_prompt.get(tuple(p), [])) for p in prompts]


def agreement(a: list[list[int]], b: list[list[int]]) -> str:
    same = sum(x == y for x, y in zip(a, b))
    return f"{same}/{len(a)} outputs identical"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m minivllm.benchmarks.throughput", description=__doc__.split("\n")[0]
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
    args = parser.parse_args(argv)

    from minivllm.model.loader import load_model

    device = torch.device(args.device)
    loaded = load_model(args.model, "float32", device)
    prompts = make_prompts(args.num_prompts, args.min_prompt, args.max_prompt, loaded.arch.vocab_size, seed=0)
    total_out = args.num_prompts * args.output_len
    total_in = sum(map(len, prompts))
    print(
        f"{args.num_prompts} requests, prompts {args.min_prompt}-{args.max_prompt} tokens ({total_in} in all), "
        f"{args.output_len} output tokens each, greedy; device {device}, torch threads {torch.get_num_threads()}"
    )

    t_mini, out_mini, engine = run_minivllm(loaded, prompts, args.output_len, args.max_num_batched_tokens, device)
    rows = [("minivllm", t_mini, "reference")]
    hf = hf_model(loaded.hf_folder, device)
    t_static, out_static = run_hf_static(hf, prompts, args.output_len, args.hf_batch_size, device)
    rows.append((f"HF generate, static batches of {args.hf_batch_size}", t_static, agreement(out_static, out_mini)))
    if not args.skip_generate_batch:
        t_gb, out_gb = run_hf_generate_batch(hf, prompts, args.output_len, device)
        rows.append(("HF generate_batch", t_gb, agreement(out_gb, out_mini)))
    print(f"{'engine':34} {'seconds':>8} {'output tok/s':>13} {'total tok/s':>12} {'minivllm speed-up':>18}  outputs")
    result = {}
    for name, t, note in rows:
        print(
            f"{name:34} {t:>8.2f} {total_out / t:>13.1f} {(total_in + total_out) / t:>12.1f} "
            f"{t / t_mini:>17.2f}x  {note}"
        )
        result[name] = t
    steps = engine.trace.steps[1:]
    print(f"minivllm ran {len(steps) - 1} steps; mean step {1e3 * sum(s.duration for s in steps) / len(steps):.0f} ms")
    return result


if __name__ == "__main__":
    main()
