"""How far bf16 greedy tokens follow fp32's and HF bf16's, prompt by prompt (§11.9; ``dtype="bfloat16"`` on a CPU).

``python -m minivllm.lab.benchmarks.bf16_agreement`` generates greedily (EOS ignored) for a few chat prompts and
the throughput benchmark's random-token prompts four ways: minivllm fp32, minivllm bf16, HF fp32 and HF bf16 (HF
one prompt at a time, no padding). For each prompt it prints how many leading tokens agree: minivllm bf16 with
minivllm fp32 (what bf16 costs), with HF bf16 (bf16 against bf16: the same kind of rounding, another op order) and
minivllm fp32 with HF fp32 (the contract: all of them). bf16 keeps 8 bits of mantissa, so two greedy runs that
order their sums differently part ways at the first near-tie and then follow different texts; the prefix is the
measure. It also times minivllm's bf16 and fp32 decode in one run (CPU time per generated token). Where the
CPU lacks AVX512_BF16 and AMX the engine says so (one warning) and bf16 is slow there.
"""

from __future__ import annotations

import argparse
import time

import torch

from minivllm.engine import arg_utils
from minivllm.lab.benchmarks.throughput import hf_model, make_prompts
from minivllm.model.cpu_features import cpu_flags, native_bf16
from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams

CHATS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain in two sentences why the sky is blue.",
    "List three prime numbers greater than 100.",
]


def minivllm_generate(model: str, dtype: str, prompts: list[list[int]], new_tokens: int) -> tuple[list, float]:
    """Greedy outputs of one engine in ``dtype`` and its process CPU seconds for the whole workload."""
    loaded = load_model(model, dtype, "cpu")
    max_len = max(map(len, prompts)) + new_tokens
    engine = arg_utils.build_engine(
        loaded=loaded, model=loaded.hf_folder, device="cpu", dtype=dtype, max_num_seqs=len(prompts),
        max_model_len=max_len, num_gpu_blocks=len(prompts) * (max_len // 16 + 2) + 1,
    )  # fmt: skip
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    t0 = time.process_time()
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    while engine.has_unfinished_requests():
        engine.step()
    seconds = time.process_time() - t0
    return [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))], seconds


@torch.inference_mode()
def hf_generate(folder: str, dtype: torch.dtype, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    from transformers import GenerationConfig

    hf = hf_model(folder, "cpu", dtype)
    gen = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return [hf.generate(torch.tensor([p]), generation_config=gen)[0, len(p) :].tolist() for p in prompts]


def common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main(argv: list[str] | None = None) -> dict[str, list[int]]:
    parser = argparse.ArgumentParser(
        prog="python -m minivllm.lab.benchmarks.bf16_agreement", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--num-random", type=int, default=8, help="random-token prompts (the throughput workload's)")
    parser.add_argument("--max-prompt", type=int, default=512, help="longest random prompt (tokens)")
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model(args.model, "float32", "cpu")
    prompts, labels = [], []
    if loaded.tokenizer is not None and loaded.tokenizer.chat_template:
        for text in CHATS:
            msgs = [{"role": "user", "content": text}]
            chat = loaded.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            prompts.append(list(loaded.tokenizer(str(chat), add_special_tokens=False)["input_ids"]))
            labels.append(text[:34])
    randoms = (
        make_prompts(args.num_random, min(32, args.max_prompt), args.max_prompt, loaded.arch.vocab_size, 0)
        if args.num_random
        else []
    )
    prompts += randoms
    labels += [f"random tokens #{i} ({len(p)})" for i, p in enumerate(randoms)]
    n = args.output_len
    mini32, t32 = minivllm_generate(args.model, "float32", prompts, n)
    mini16, t16 = minivllm_generate(args.model, "bfloat16", prompts, n)
    hf32 = hf_generate(loaded.hf_folder, torch.float32, prompts, n)
    hf16 = hf_generate(loaded.hf_folder, torch.bfloat16, prompts, n)

    flags = cpu_flags()
    native = {True: "has", False: "lacks", None: "may lack"}[native_bf16(flags)]
    print(
        f"{len(prompts)} prompts, {n} greedy tokens each; this CPU {native} avx512_bf16/amx_bf16; "
        f"torch threads {torch.get_num_threads()}"
    )
    cols = ("mini bf16 = mini fp32", "mini bf16 = HF bf16", "mini fp32 = HF fp32")
    print(f"{'prompt':36} " + " ".join(f"{c:>22}" for c in cols))
    result: dict[str, list[int]] = {c: [] for c in cols}
    for i, label in enumerate(labels):
        row = [
            common_prefix(mini16[i], mini32[i]),
            common_prefix(mini16[i], hf16[i]),
            common_prefix(mini32[i], hf32[i]),
        ]
        for c, v in zip(cols, row):
            result[c].append(v)
        print(f"{label:36} " + " ".join(f"{f'{v}/{n}':>22}" for v in row))
    summary = "  ".join(f"{c}: {sum(v == n for v in result[c])}/{len(prompts)} identical" for c in cols)
    print(f"whole outputs identical: {summary}")
    per_tok = len(prompts) * n
    print(
        f"minivllm CPU time per generated token (prompts included): fp32 {1e3 * t32 / per_tok:.1f} ms, "
        f"bf16 {1e3 * t16 / per_tok:.1f} ms ({t32 / t16:.2f}x)"
    )
    return result


if __name__ == "__main__":
    main()
