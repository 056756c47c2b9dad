"""One digest of everything an engine run decides: tokens, texts, finish reasons and every trace step.

The check behind issue 33's "same tokens and schedules": run it before and after a change to the runner's
host work (input preparation, attention plan, sampling) and compare the digests. Mixed workloads on the
real SmolLM2 (greedy and seeded sampling with top-k/top-p, min_tokens, stop ids, stop strings, a guided
choice, chunked prefill under a small budget, preemption in a small KV cache, prefix-cache hits, n-gram
speculative decoding) and a 64-request batch on the one-layer random model that
``minivllm.lab.benchmarks.host_overhead`` times. Step times are left out (they are the only thing that may
change); everything else of each ``StepRecord`` is in.

``python -m tests.helpers.step_digest [--scenes NAME ...]`` prints one sha256 per scene.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import tempfile
from typing import Any

import torch

from minivllm.engine import arg_utils
from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams


def _prompts(num: int, low: int, high: int, vocab: int, seed: int, shared: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(3, vocab, (shared,), generator=g).tolist()
    lengths = torch.randint(low, high + 1, (num,), generator=g).tolist()
    return [prefix + torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]


def _params(i: int, eos_free: bool) -> SamplingParams:
    """A different mix of sampling parameters for each request index (every path of the runner's sampler)."""
    kind = i % 6
    if kind == 0:
        return SamplingParams(max_tokens=12 + i % 5, temperature=0.0, ignore_eos=eos_free)
    if kind == 1:
        return SamplingParams(max_tokens=10, temperature=0.8, top_k=40, seed=100 + i, ignore_eos=eos_free)
    if kind == 2:
        return SamplingParams(max_tokens=9, temperature=1.0, top_p=0.9, seed=200 + i, min_tokens=4)
    if kind == 3:
        return SamplingParams(max_tokens=14, temperature=0.0, stop_token_ids=[13, 30], min_tokens=2)
    if kind == 4:
        return SamplingParams(max_tokens=11, temperature=0.7, top_k=20, top_p=0.8, seed=300 + i, stop=["e"])
    return SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=eos_free)


def _run(
    engine: LLMEngine,
    prompts: list[list[int]],
    params: list[SamplingParams],
    stagger: int,
    salts: list[str | None] | None = None,
) -> dict[str, Any]:
    """Add the requests (``stagger`` at a time, one engine step between groups), run to the end, digest."""
    for start in range(0, len(prompts), stagger):
        for i in range(start, min(start + stagger, len(prompts))):
            engine.add_request(f"r{i}", prompts[i], params[i], cache_salt=salts[i] if salts else None)
        engine.step()
    while engine.has_unfinished_requests():
        engine.step()
    outs = {}
    for i in range(len(prompts)):
        c = engine.outputs[f"r{i}"].outputs[0]
        outs[f"r{i}"] = [c.token_ids, c.text, c.finish_reason, c.stop_reason]
    steps = []
    for rec in engine.trace.steps:
        d = dataclasses.asdict(rec)
        d.pop("start"), d.pop("end")
        steps.append(d)
    return {"outputs": outs, "steps": steps}


def _engine(loaded: Any, **kw: Any) -> LLMEngine:
    return arg_utils.build_engine(loaded=loaded, model=loaded.hf_folder, device="cpu", dtype="float32", **kw)


def scene_mixed(loaded: Any) -> dict[str, Any]:
    """Twelve requests of 20-200 tokens, a shared 32-token prefix, every sampling mix, a 96-token budget."""
    prompts = _prompts(12, 20, 200, loaded.arch.vocab_size, 1, shared=32)
    engine = _engine(loaded, max_num_batched_tokens=96, max_num_seqs=8, max_model_len=260, num_gpu_blocks=200)
    return _run(engine, prompts, [_params(i, eos_free=False) for i in range(12)], stagger=3)


def scene_preempt(loaded: Any) -> dict[str, Any]:
    """Ten greedy and seeded requests in a KV cache too small for all of them: preemptions and recomputes."""
    prompts = _prompts(10, 40, 120, loaded.arch.vocab_size, 2)
    engine = _engine(loaded, max_num_batched_tokens=256, max_num_seqs=10, max_model_len=160, num_gpu_blocks=40)
    return _run(engine, prompts, [_params(i, eos_free=True) for i in range(10)], stagger=10)


def scene_spec(loaded: Any) -> dict[str, Any]:
    """N-gram speculative decoding on repetitive prompts (drafts verified, some accepted)."""
    g = torch.Generator().manual_seed(3)
    prompts = [(torch.randint(3, 500, (8,), generator=g).tolist() * 6)[: 30 + 4 * i] for i in range(6)]
    engine = _engine(
        loaded, max_num_batched_tokens=128, max_num_seqs=6, max_model_len=120, num_gpu_blocks=80,
        num_speculative_tokens=3,
    )  # fmt: skip
    params = [SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True) for _ in prompts]
    return _run(engine, prompts, params, stagger=2)


def scene_guided(loaded: Any) -> dict[str, Any]:
    """A guided choice next to plain requests (the grammar's logits mask rides in the same batch)."""
    prompts = _prompts(4, 10, 40, loaded.arch.vocab_size, 4)
    params = [_params(i, eos_free=True) for i in range(3)]
    params.append(SamplingParams(max_tokens=8, temperature=0.0, guided_choice=["yes", "no", "maybe"]))
    engine = _engine(loaded, max_num_batched_tokens=64, max_num_seqs=4, max_model_len=64, num_gpu_blocks=40)
    return _run(engine, prompts, params, stagger=4)


def scene_batch64(_: Any) -> dict[str, Any]:
    """64 requests on host_overhead's one-layer random model: a large decode batch, chunked fill."""
    from minivllm.lab.benchmarks.host_overhead import load

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load(None, 1, "cpu", "float32", tmp)
        prompts = _prompts(64, 8, 140, loaded.arch.vocab_size, 5)
        engine = _engine(loaded, max_num_batched_tokens=1024, max_num_seqs=64, max_model_len=200, num_gpu_blocks=800)
        params = [dataclasses.replace(_params(i, eos_free=True), stop=None) for i in range(64)]  # no tokenizer
        return _run(engine, prompts, params, stagger=16)


def scene_salted(loaded: Any) -> dict[str, Any]:
    """Eight greedy requests on one shared 48-token prefix, two cache salts: prefix hits only within a salt."""
    prompts = _prompts(8, 5, 30, loaded.arch.vocab_size, 6, shared=48)
    params = [SamplingParams(max_tokens=10 + i, temperature=0.0, ignore_eos=True) for i in range(8)]
    engine = _engine(loaded, max_num_batched_tokens=128, max_num_seqs=8, max_model_len=120, num_gpu_blocks=80)
    return _run(engine, prompts, params, stagger=2, salts=["a" if i % 2 else None for i in range(8)])


def scene_sampled64(_: Any) -> dict[str, Any]:
    """64 requests, all with the same seeded top-k/top-p parameters, on host_overhead's random model."""
    from minivllm.lab.benchmarks.host_overhead import load

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load(None, 1, "cpu", "float32", tmp)
        prompts = _prompts(64, 8, 100, loaded.arch.vocab_size, 7)
        engine = _engine(loaded, max_num_batched_tokens=512, max_num_seqs=64, max_model_len=160, num_gpu_blocks=800)
        params = [
            SamplingParams(max_tokens=12 + i % 7, temperature=0.9, top_k=50, top_p=0.95, seed=i, ignore_eos=True)
            for i in range(64)
        ]
        return _run(engine, prompts, params, stagger=16)


SCENES = {"mixed": scene_mixed, "preempt": scene_preempt, "spec": scene_spec, "guided": scene_guided,
          "salted": scene_salted, "batch64": scene_batch64, "sampled64": scene_sampled64}  # fmt: skip


def digest(result: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True, default=str).encode()).hexdigest()


def main(argv: list[str] | None = None) -> dict[str, str]:
    ap = argparse.ArgumentParser(prog="python -m tests.helpers.step_digest", description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", choices=sorted(SCENES), default=list(SCENES))
    ap.add_argument("--dump", help="also write the full results (JSON) here, to diff two runs")
    args = ap.parse_args(argv)
    from minivllm.model.loader import load_model

    loaded = load_model("smollm2", torch.float32, torch.device("cpu"))
    results, digests = {}, {}
    for name in args.scenes:
        results[name] = SCENES[name](loaded)
        digests[name] = digest(results[name])
        n = len(results[name]["steps"])
        print(f"{name:8} {digests[name]}  ({n} steps, {len(results[name]['outputs'])} requests)", flush=True)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(results, f, sort_keys=True, default=str)
    return digests


if __name__ == "__main__":
    main()
