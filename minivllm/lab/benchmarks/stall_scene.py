"""Sizing §11.1's stall scene for whatever device and model runs it (the instructor notebook, ch. 11).

§11.1's scene: chats decode, a long prompt lands; unchunked, its prefill holds every chat for one long step;
chunked, it rides along one chunk per step. Fixed numbers do not travel: on a fast GPU a small model's
2,048-token prefill can last about as long as a decode step, and the scene shows nothing. So the scene is
sized on start-up: ``measure_stall_scene`` times, on a real engine with the chats decoding, a pure decode
step (the median of several) and single-step prefills of two or three prompt lengths (``max_tokens=1``,
unchunked, after a warm-up); ``choose_scene`` (pure, unit-tested with given numbers) fits the prefill cost
``c + a·L + b·L²`` (``PrefillCost``) and picks the long prompt and the budget. The live demo page does the
same in JS (``serving/static/demo.js``, ``sizeScene``, without ``c``). Not in vLLM: a teaching aid.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minivllm.sampling_params import SamplingParams

TOO_SMALL_HINT = (
    "The model is too small for this GPU to show §11.1's stall: set MINIVLLM_INSTRUCTOR_MODEL to a larger model, a "
    "Hugging Face hub id (e.g. meta-llama/Llama-3.1-8B-Instruct, fetched through the HF cache) or a local folder "
    "(Llama, Qwen2, Mistral), and run the notebook again."
)


@dataclass(frozen=True)
class PrefillCost:
    """Seconds a step spends prefilling beside the decodes: ``c + a·L + b·L²`` for L whole-prompt tokens.

    ``a``: the linear layers, per token. ``b``: attention, each token to all before it. ``c``: the cost of a
    step having a prefill at all, which may be negative (a GPU hides a short prefill under the weights' read;
    a CPU pays a fixed cost per prompt); a cost below zero counts as zero."""

    a: float
    b: float
    c: float = 0.0

    def __call__(self, end: int, start: int = 0) -> float:
        """Prefilling prompt tokens ``[start, end)``, each attending to every token before it."""
        return max(0.0, self.c + self.a * (end - start) + self.b * (end * end - start * start))

    def tokens_for(self, seconds: float) -> float:
        """The prompt length whose prefill costs ``seconds`` (inf when none does)."""
        extra = seconds - self.c
        if extra <= 0:
            return 0.0
        root = self.a + math.sqrt(self.a**2 + 4 * self.b * extra)  # b·L² + a·L = extra, stable as b -> 0
        return 2 * extra / root if root > 0 else math.inf


def fit_prefill_cost(timings: Sequence[tuple[int, float]]) -> PrefillCost:
    """Least squares through (L, seconds) points, ``a, b >= 0``: a term that fits negative (timing noise) is
    dropped and the rest refitted. Of the models left, the closest to the points wins, the fullest on a tie."""
    x = np.array([n for n, _ in timings], dtype=float) / 1000  # kilotokens: a well-conditioned fit
    t = np.array([s for _, s in timings], dtype=float)
    columns = {"c": np.ones_like(x), "a": x, "b": x * x}
    best: tuple[float, int, dict[str, float]] | None = None
    for rank, terms in enumerate(("cab", "ca", "cb", "ab", "a", "b", "c")):
        if len(terms) > len(x):
            continue
        coef, *_ = np.linalg.lstsq(np.stack([columns[k] for k in terms], axis=1), t, rcond=None)
        fit = dict(zip(terms, coef.tolist()))
        if fit.get("a", 0.0) < 0 or fit.get("b", 0.0) < 0:
            continue
        sse = float(np.sum((t - sum(fit[k] * columns[k] for k in terms)) ** 2))
        key = (round(sse / (float(np.sum(t * t)) + 1e-30), 9), rank, fit)
        if best is None or key[:2] < best[:2]:
            best = key
    fit = best[2] if best is not None else {}
    return PrefillCost(fit.get("a", 0.0) / 1e3, fit.get("b", 0.0) / 1e6, fit.get("c", 0.0))


def slowest_chunked_step(decode_step: float, cost: PrefillCost, tokens: int, chunk: int) -> float:
    """The slowest step of a ``tokens`` prompt prefilled ``chunk`` tokens a step beside the decodes."""
    ends = [min(s + max(chunk, 1), tokens) for s in range(0, tokens, max(chunk, 1))]
    return decode_step + max(cost(e, s) for s, e in zip([0, *ends], ends))


@dataclass(frozen=True)
class StallScene:
    """What was measured (seconds), what was chosen, and what the fit predicts for the scene."""

    decode_step: float  # one step decoding the chats, nothing else
    prefill_timings: tuple[tuple[int, float], ...]  # (prompt tokens, step time beyond a decode step)
    cost: PrefillCost  # fitted to prefill_timings
    long_tokens: int  # the long prompt chosen
    budget: int  # max_num_batched_tokens of the chunked run
    predicted_stall: float  # the unchunked step with the whole prompt and the chats' decodes
    predicted_ratio: float  # predicted_stall / decode_step
    predicted_chunked_step: float  # the chunked run's slowest step (the last chunks attend to the most)
    capped_by: str | None  # None (target reached), "max_model_len" or "kv cache"
    max_prompt_tokens: int  # the longest prompt allowed (max_model_len and the KV cache)
    num_chats: int
    block_size: int
    target_ratio: float
    chunk_cost_steps: float

    @property
    def budget_fits(self) -> bool:
        """Whether the budget's slowest chunk keeps within ``chunk_cost_steps`` decode steps of prefill."""
        return self.predicted_chunked_step - self.decode_step <= self.chunk_cost_steps * self.decode_step * (1 + 1e-9)

    def explain(self) -> str:
        def ms(s: float) -> str:
            return f"{s * 1e3:.1f} ms"

        k = self.cost
        timed = ", ".join(f"{n:,} tokens +{ms(t)}" for n, t in self.prefill_timings)
        stall = f"its unchunked step is predicted at {ms(self.predicted_stall)}, {self.predicted_ratio:.1f}x a decode"
        lines = [
            f"Measured: a decode step of {self.num_chats} chats takes {ms(self.decode_step)} (median). One step"
            f" prefilling a whole prompt beside them takes longer by: {timed}.",
            f"Fitted prefill cost: {k.c * 1e3:.2f} ms + {k.a * 1e6:.3g} µs·L + {k.b * 1e9:.3g} ns·L² (1,000 tokens:"
            f" {ms(k(1000))}).",
        ]
        if self.capped_by is None:
            lines.append(
                f"Long prompt: {self.long_tokens:,} tokens, the shortest (in whole blocks of {self.block_size}) whose"
                f" unchunked step stalls the chats for at least {self.target_ratio:g}x a decode step: {stall} step."
            )
        else:
            limit = "max_model_len" if self.capped_by == "max_model_len" else "the KV cache (beside the chats)"
            lines.append(
                f"Long prompt: {self.long_tokens:,} tokens, the longest {limit} allows: {stall} step; the aim was"
                f" {self.target_ratio:g}x, which no allowed prompt reaches."
            )
        lines.append(
            f"Budget: {self.budget} tokens ({self.budget - self.num_chats}-token chunks beside the {self.num_chats}"
            f" decodes), the largest power of two (>= block size {self.block_size}, <= the prompt) whose slowest"
            f" chunked step adds at most {self.chunk_cost_steps:g} decode steps of prefill: predicted"
            f" {ms(self.predicted_chunked_step)} ({self.predicted_chunked_step / self.decode_step:.1f}x a decode step)."
            + ("" if self.budget_fits else " Even the smallest budget's chunk costs more than that here.")
        )
        if self.capped_by == "max_model_len":
            lines.append(TOO_SMALL_HINT)
        elif self.capped_by == "kv cache":
            lines.append("A larger KV cache (num_gpu_blocks) would allow a longer prompt.")
        return "\n".join(lines)


def choose_scene(
    decode_step: float,
    prefill_timings: Sequence[tuple[int, float]],
    *,
    max_model_len: int,
    num_chats: int = 8,
    long_output_tokens: int = 8,
    kv_room_tokens: int | None = None,
    block_size: int = 16,
    target_ratio: float = 10.0,
    chunk_cost_steps: float = 2.0,
) -> StallScene:
    """Fit the prefill cost, then choose. The long prompt: the shortest whole number of blocks whose unchunked
    step (a decode step + its prefill) is at least ``target_ratio`` decode steps, up to ``max_model_len -
    long_output_tokens`` and ``kv_room_tokens`` (the KV cache's tokens left beside the chats). The budget: the
    largest power of two, at least the block size and above ``num_chats``, at most the prompt, whose slowest
    chunk costs at most ``chunk_cost_steps`` decode steps (so the chunked chats still stream at a few decode
    steps a token)."""
    cost = fit_prefill_cost(prefill_timings)
    cap = max_model_len - long_output_tokens
    capped_by: str | None = "max_model_len"
    if kv_room_tokens is not None and kv_room_tokens < cap:
        cap, capped_by = kv_room_tokens, "kv cache"
    need = cost.tokens_for((target_ratio - 1) * decode_step)
    long_tokens = max(block_size, math.ceil(need / block_size) * block_size) if need < math.inf else cap + 1
    if long_tokens <= cap:
        capped_by = None
    long_tokens = min(long_tokens, cap)

    budget = 1 << max(block_size - 1, num_chats).bit_length()  # the smallest power of two >= block_size, > chats
    while 2 * budget <= long_tokens:
        if (
            slowest_chunked_step(decode_step, cost, long_tokens, 2 * budget - num_chats)
            > (1 + chunk_cost_steps) * decode_step
        ):
            break
        budget *= 2
    stall = decode_step + cost(long_tokens)
    return StallScene(
        decode_step=decode_step,
        prefill_timings=tuple((int(n), float(t)) for n, t in prefill_timings),
        cost=cost,
        long_tokens=long_tokens,
        budget=budget,
        predicted_stall=stall,
        predicted_ratio=stall / decode_step,
        predicted_chunked_step=slowest_chunked_step(decode_step, cost, long_tokens, budget - num_chats),
        capped_by=capped_by,
        max_prompt_tokens=cap,
        num_chats=num_chats,
        block_size=block_size,
        target_ratio=target_ratio,
        chunk_cost_steps=chunk_cost_steps,
    )


def random_prompt(num_tokens: int, seed: int, vocab_size: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, vocab_size) for _ in range(num_tokens)]


def measure_stall_scene(
    make_engine: Callable[..., Any],
    vocab_size: int,
    max_model_len: int,
    *,
    num_chats: int = 8,
    chat_prompt_tokens: int = 48,
    decode_steps: int = 16,
    calibration_tokens: Sequence[int] = (512, 2048, 8192),
    repeats: int = 2,
    long_output_tokens: int = 8,
    kv_room_tokens: int | None = None,
    block_size: int = 16,
    target_ratio: float = 10.0,
    chunk_cost_steps: float = 2.0,
    seed: int = 0,
) -> StallScene:
    """Time the scene's parts on ``make_engine(**settings)`` (an ``LLMEngine``; settings named as
    ``EngineConfig.from_kwargs``'s), then ``choose_scene``. With ``num_chats`` chats decoding: one warm-up step
    with the longest calibration prompt, the median of ``decode_steps`` pure decode steps, then each calibration
    prompt (capped to the longest allowed) ``repeats`` times as one unchunked step (``max_tokens=1``); its time
    beyond a decode step, the fastest of the repeats, is that length's prefill cost."""
    cap = max_model_len - long_output_tokens
    lengths = sorted({max(1, min(n, cap)) for n in calibration_tokens})
    prompt_steps = -(-num_chats * chat_prompt_tokens // (lengths[-1] + num_chats))  # steps for the chats' prompts
    chat_max_tokens = prompt_steps + 1 + decode_steps + repeats * len(lengths) + 4
    engine_len = max(lengths[-1] + 1, chat_prompt_tokens + chat_max_tokens)
    tokens = num_chats * (chat_prompt_tokens + chat_max_tokens) + engine_len
    engine = make_engine(
        max_num_seqs=num_chats + 1,
        max_model_len=engine_len,
        enable_chunked_prefill=False,
        max_num_batched_tokens=engine_len + num_chats,
        block_size=block_size,
        num_gpu_blocks=tokens // block_size + num_chats + 3,
    )
    chat = SamplingParams(max_tokens=chat_max_tokens, ignore_eos=True)
    for i in range(num_chats):
        engine.add_request(f"chat{i}", random_prompt(chat_prompt_tokens, seed + i, vocab_size), chat)
    prompts = iter(range(seed + num_chats, seed + num_chats + 1 + repeats * len(lengths)))

    def prefill_step(n: int) -> float:
        """One step prefilling a whole n-token prompt beside the chats' decodes; its duration."""
        rid = f"prompt{len(engine.trace.requests)}"
        engine.add_request(rid, random_prompt(n, next(prompts), vocab_size), SamplingParams(max_tokens=1))
        engine.step()
        rec = engine.trace.steps[-1]
        if rec.prefill_tokens.get(rid) != n or sum(rec.decode_tokens.values()) != num_chats:
            raise RuntimeError(f"a calibration step did not prefill {n} tokens beside {num_chats} decodes: {rec}")
        return rec.duration

    while not engine.trace.steps or sum(engine.trace.steps[-1].decode_tokens.values()) < num_chats:
        engine.step()  # until the chats' prompts are in and all of them decode
    prefill_step(lengths[-1])  # warm-up: kernels, the allocator at the largest shape
    for _ in range(decode_steps):
        engine.step()
    decodes = [s for s in engine.trace.steps[-decode_steps:] if sum(s.decode_tokens.values()) == num_chats]
    if len(decodes) != decode_steps or any(sum(s.prefill_tokens.values()) for s in decodes):
        raise RuntimeError("the decode steps were not pure decode steps of all the chats")
    decode = statistics.median(s.duration for s in decodes)
    timings = [(n, min(prefill_step(n) for _ in range(repeats)) - decode) for n in lengths]
    engine.abort_request([f"chat{i}" for i in range(num_chats)])
    return choose_scene(
        decode,
        timings,
        max_model_len=max_model_len,
        num_chats=num_chats,
        long_output_tokens=long_output_tokens,
        kv_room_tokens=kv_room_tokens,
        block_size=block_size,
        target_ratio=target_ratio,
        chunk_cost_steps=chunk_cost_steps,
    )
