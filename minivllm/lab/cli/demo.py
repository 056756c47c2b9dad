"""``python -m minivllm demo``: the real model answers chats, then §11.1's scene, with and without chunking.

Part 1 answers a few chat prompts with SmolLM2 (greedy). Part 2 replays the
complaint of §11.1.1: short chats are streaming tokens when a long RAG-style
prompt (2,000+ tokens) arrives. Without chunked prefill the whole prompt runs
in one step and every chat stalls for that step; with chunked prefill the
prompt is cut into budget-sized chunks that ride along with the decodes
(§11.2). The demo prints, for the chats, the typical (median) and the worst
inter-token gap, and the long request's time to first token. Its numbers are
wall-clock times: when other programs share the CPU (a load average well above
0) it says so, since its verdict may then not hold.
"""

from __future__ import annotations

import argparse
import os
import time

from minivllm.engine import arg_utils
from minivllm.engine.llm_engine import LLMEngine
from minivllm.metrics.stats import percentile
from minivllm.sampling_params import SamplingParams

CHATS = [
    "What is the capital of France?",
    "Give me three tips for staying focused while studying.",
    "Explain what a hash table is in two sentences.",
    "Write a haiku about autumn rain.",
]
DOCUMENT = (
    "The Roman aqueducts carried water from distant springs into the cities, using gravity alone. Engineers "
    "surveyed the land so that each channel dropped only a little over many kilometres, and where valleys "
    "crossed the route they built arched bridges of stone. "
)


def build_engine(loaded, chunked: bool, budget: int, max_model_len: int, scheduler_cls=None) -> LLMEngine:
    """A fresh engine (empty prefix cache) sharing the already-loaded model; without chunking the budget is a
    whole max-length prompt. ``scheduler_cls``: the V1 Scheduler by default, or a ``minivllm.lab.baselines`` one."""
    return arg_utils.build_engine(
        loaded=loaded,
        scheduler_cls=scheduler_cls,
        model=loaded.hf_folder,
        device="cpu",
        dtype="float32",
        max_num_seqs=16,
        max_model_len=max_model_len,
        enable_chunked_prefill=chunked,
        max_num_batched_tokens=budget if chunked else max_model_len,
    )


def long_prompt(tokenizer, num_tokens: int) -> list[int]:
    doc = tokenizer.encode(DOCUMENT * (num_tokens // 40 + 2))[: num_tokens - 16]
    return doc + tokenizer.encode("\nSummarise the document above in one sentence.")


def chat_ids(tokenizer, text: str) -> list[int]:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(prompt, add_special_tokens=False)


def run_scene(engine: LLMEngine, tokenizer, long_tokens: int, arrive_after: int, chat_tokens: int) -> dict:
    """Chats decode; after ``arrive_after`` steps the long prompt lands. Returns the §11.1 numbers."""
    params = SamplingParams(max_tokens=chat_tokens, temperature=0.0, ignore_eos=True)
    for i, text in enumerate(CHATS):
        engine.add_request(f"chat{i}", chat_ids(tokenizer, text), params)
    steps = 0
    while engine.has_unfinished_requests():
        if steps == arrive_after:
            engine.add_request(
                "long",
                long_prompt(tokenizer, long_tokens),
                SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True),
            )
        engine.step()
        steps += 1
    recs = engine.trace.requests
    gaps = [g for i in range(len(CHATS)) for g in recs[f"chat{i}"].itls]
    return dict(
        steps=steps,
        itl_max=max(gaps),
        itl_p99=percentile(gaps, 99),  # not printed by the demo (with ~90 gaps it is the max); 11_1 reads it
        itl_p50=percentile(gaps, 50),
        ttft_long=recs["long"].ttft,
        long_tokens=recs["long"].num_prompt_tokens,
    )


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none, e.g. Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_warning(before: float | None, after: float | None, own_threads: int) -> str | None:
    """A warning when other work shared the CPU: a load average above 0.5 before the demo started, or, at the
    end, above what the demo's own ``own_threads`` threads account for."""
    if before is None or after is None:
        return None
    others = max(before, after - own_threads)
    if others <= 0.5:
        return None
    return (
        f"Note: other work was running on this machine (load average {before:.1f} before the demo, {after:.1f} "
        f"at the end, with {own_threads} threads of its own): the wall-clock numbers above include waiting for "
        "the CPU, so the comparison may not hold. Run it again on a quiet machine."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minivllm demo", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="'smollm2' or a local HF folder (Llama family)")
    parser.add_argument("--long-prompt-tokens", type=int, default=2048)
    parser.add_argument("--max-num-batched-tokens", type=int, default=256, help="token budget when chunking")
    parser.add_argument("--chat-tokens", type=int, default=24, help="tokens each chat generates in the scene")
    parser.add_argument("--skip-chat", action="store_true", help="skip part 1")
    args = parser.parse_args(argv)
    if args.long_prompt_tokens < 64:
        parser.error("--long-prompt-tokens must be at least 64")
    if args.max_num_batched_tokens < 16:
        parser.error("--max-num-batched-tokens must be at least 16 (max_num_seqs is 16)")

    import torch

    from minivllm.model.loader import load_model

    load_before = load_average()
    t0 = time.perf_counter()
    loaded = load_model(args.model)
    tok = loaded.tokenizer
    print(
        f"Loaded {args.model} in {time.perf_counter() - t0:.1f} s "
        f"({loaded.arch.num_layers} layers, {loaded.arch.num_heads} query heads, {loaded.arch.num_kv_heads} KV heads)"
    )
    max_model_len = min(loaded.arch.max_position_embeddings, max(4096, args.long_prompt_tokens + 64))

    if not args.skip_chat:
        print("\n== Part 1: chat ==")
        engine = build_engine(loaded, True, args.max_num_batched_tokens, max_model_len)
        params = SamplingParams(max_tokens=48, temperature=0.0)
        for i, text in enumerate(CHATS[:3]):
            engine.add_request(str(i), chat_ids(tok, text), params)
        while engine.has_unfinished_requests():
            engine.step()
        for i, text in enumerate(CHATS[:3]):
            print(f"Q: {text}\nA: {engine.outputs[str(i)].outputs[0].text.strip()}\n")

    print(f"== Part 2: §11.1's scene: {len(CHATS)} chats decoding, a {args.long_prompt_tokens}-token prompt arrives ==")
    rows = []
    for chunked in (False, True):
        engine = build_engine(loaded, chunked, args.max_num_batched_tokens, max_model_len)
        r = run_scene(engine, tok, args.long_prompt_tokens, arrive_after=4, chat_tokens=args.chat_tokens)
        label = f"chunked prefill, budget {args.max_num_batched_tokens}" if chunked else "no chunking"
        rows.append((label, r))
    print(
        "ITL (inter-token latency) is the gap between two tokens of one chat; TTFT (time to first token) is how long\n"
        "the long request waited for its first token.\n"
    )
    print(f"{'':34} {'chat ITL p50':>13} {'chat ITL max':>13} {'long TTFT':>10}")
    for label, r in rows:
        print(f"{label:34} {r['itl_p50'] * 1e3:>10.0f} ms {r['itl_max'] * 1e3:>10.0f} ms {r['ttft_long']:>8.2f} s")
    (_, off), (_, on) = rows
    print(
        f"\nChunking cut the worst chat stall {off['itl_max'] / on['itl_max']:.1f}x "
        f"and changed the long prompt's TTFT by {on['ttft_long'] / off['ttft_long']:.2f}x (§11.2: the price)."
    )
    warning = load_warning(load_before, load_average(), torch.get_num_threads())
    if warning:
        print(f"\n{warning}")
    print("\nNext: the chapter notebooks, `jupyter lab chapters/` (start with ch11_chunked_prefill/11_1).")


if __name__ == "__main__":
    main()
