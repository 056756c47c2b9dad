"""Speculative decoding on CPU: acceptance rate and speed-up on a repetitive workload (§11.8.2).

``python -m minivllm.lab.benchmarks.spec_decode`` runs "quote the passage" prompts
(the answer repeats text from the prompt, so prompt lookup finds good drafts)
and free-form chat prompts, each with and without n-gram speculation, and
prints drafted / accepted tokens, acceptance rate, steps and wall time. Greedy,
so the outputs must be identical (checked).
"""

from __future__ import annotations

import argparse
import time

from minivllm.engine.arg_utils import build_engine
from minivllm.lab.metrics.summary import summarize
from minivllm.sampling_params import SamplingParams

PASSAGE = (
    "The committee reviewed the proposal in detail. The budget for the new library is twelve million dollars, "
    "the construction will take eighteen months, and the building will open to the public in the spring."
)
QUOTE_TASKS = [
    f"Here is a passage:\n{PASSAGE}\nCopy the passage exactly, word for word.",
    f"Passage: {PASSAGE}\nQuote the sentence about the budget, then quote the whole passage again.",
    f"{PASSAGE}\nRepeat the text above twice.",
    f"Summarise and quote: {PASSAGE}",
]
CHAT_TASKS = [
    "Write a short poem about the ocean.",
    "Explain how a bicycle works.",
    "Give me a recipe for pancakes.",
    "What are the planets of the solar system?",
]


def run(loaded, prompts, k: int, max_tokens: int) -> tuple[float, list[list[int]], dict]:
    engine = build_engine(
        loaded=loaded,
        model=loaded.hf_folder,
        device="cpu",
        max_num_batched_tokens=512,
        max_num_seqs=8,
        max_model_len=2048,
        num_speculative_tokens=k,
        prompt_lookup_max=4,
        prompt_lookup_min=2,
    )
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    while engine.has_unfinished_requests():
        engine.step()
    elapsed = time.perf_counter() - t0
    m = summarize(engine.trace)
    stats = dict(
        steps=len(engine.trace.steps),
        drafted=m.num_draft_tokens,
        accepted=m.num_accepted_tokens,
        rate=m.spec_acceptance_rate,
    )
    return elapsed, [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))], stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minivllm.lab.benchmarks.spec_decode")
    parser.add_argument("--num-speculative-tokens", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args(argv)

    from minivllm.model.loader import load_model

    loaded = load_model("smollm2")
    tok = loaded.tokenizer
    if tok is None:
        raise RuntimeError("The smollm2 model loaded without a tokenizer: the chat prompts need one.")

    def chat(text: str) -> list[int]:
        return tok.encode(
            tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )

    print(
        f"{'workload':10} {'k':>2} {'steps':>6} {'drafted':>8} {'accepted':>9} {'accept %':>9} {'seconds':>8} "
        f"{'speed-up':>9}"
    )
    for name, tasks in (("quote", QUOTE_TASKS), ("chat", CHAT_TASKS)):
        prompts = [chat(t) for t in tasks]
        base_t, base_out, base = run(loaded, prompts, 0, args.max_tokens)
        spec_t, spec_out, spec = run(loaded, prompts, args.num_speculative_tokens, args.max_tokens)
        assert spec_out == base_out, "speculation changed a greedy output"
        for k, t, s in ((0, base_t, base), (args.num_speculative_tokens, spec_t, spec)):
            rate = f"{100 * s['rate']:.0f}" if s["drafted"] else "-"
            print(
                f"{name:10} {k:>2} {s['steps']:>6} {s['drafted']:>8} {s['accepted']:>9} {rate:>9} {t:>8.2f} "
                f"{base_t / t:>8.2f}x"
            )


if __name__ == "__main__":
    main()
