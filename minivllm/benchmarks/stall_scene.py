"""Sizing §11.1's stall scene for whatever device and model runs it (the instructor notebook, ch. 11).

§11.1's scene: chats decode, a long prompt lands; unchunked, its prefill holds every chat for one long step;
chunked, it rides along one chunk per step. Fixed numbers do not travel: on a fast GPU a small model's
2,048-token prefill can last about as long as a decode step, and the scene shows nothing. So the scene is
sized on start-up: ``measure_stall_scene`` times, on a real engine with the chats decoding, a pure decode
step (the median of several) and single-step prefills of two or three prompt lengths (``max_tokens=1``,
unchunked, after a warm-up); ``choose_scene`` (pure, unit-tested with given numbers) fits the prefill cost
``a·L + b·L²`` (the linear layers, and attention over the prompt) and picks the long prompt and the budget.
The live demo page does the same in JS (``entrypoints/static/demo.js``, ``sizeScene``). Not in vLLM: a
teaching aid.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minivllm.sampling_params import SamplingParams

TOO_SMALL_HINT = (
    "The model is too small for this GPU to show §11.1's stall: set MINIVLLM_INSTRUCTOR_MODEL to a larger local "
    "Hugging Face folder (Llama, Qwen2, Mistral) and run the notebook again."
)


def fit_prefill_cost(timings: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``a, b >= 0`` of ``seconds = a·L + b·L²`` through (L, seconds) points. A negative
    coefficient (timing noise) is dropped and the other refitted alone; no positive time gives (0, 0)."""
    s2 = sum(n**2 for n, _ in timings)
    s3 = sum(n**3 for n, _ in timings)
    s4 = sum(n**4 for n, _ in timings)
    t1 = sum(n * t for n, t in timings)
    t2 = sum(n**2 * t for n, t in timings)
    det = s2 * s4 - s3 * s3
    if det > 0:
        a, b = (t1 * s4 - t2 * s3) / det, (s2 * t2 - s3 * t1) / det
        if a >= 0 and b >= 0:
            return a, b
    a_only = t1 / s2 if s2 else 0.0  # the line through the origin
    b_only = t2 / s4 if s4 else 0.0  # the parabola through the origin
    if a_only <= 0 and b_only <= 0:
        return 0.0, 0.0

    def sse(a: float, b: float) -> float:
        return sum((t - a * n - b * n * n) ** 2 for n, t in timings)

    return min(((max(a_only, 0.0), 0.0), (0.0, max(b_only, 0.0))), key=lambda ab: sse(*ab))


@dataclass(frozen=True)
class StallScene:
    """What was measured (seconds), what was chosen, and what the fit predicts for the scene."""

    decode_step: float  # one step decoding the chats, nothing else
    prefill_timings: tuple[tuple[int, float], ...]  # (prompt tokens, step time beyond a decode step)
    a: float  # prefill cost = a·L + b·L² seconds
    b: float
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

    def prefill_cost(self, tokens: int, start: int = 0) -> float:
        """Predicted seconds to prefill prompt tokens ``[start, tokens)`` (attention to all earlier ones)."""
        return self.a * (tokens - start) + self.b * (tokens**2 - start**2)

    def explain(self) -> str:
        def ms(s: float) -> str:
            return f"{s * 1e3:.1f} ms"

        timed = ", ".join(f"{n:,} tokens +{ms(t)}" for n, t in self.prefill_timings)
        lines = [
            f"Measured: a decode step of {self.num_chats} chats takes {ms(self.decode_step)} (median). One step"
            f" prefilling a whole prompt beside them takes longer by: {timed}.",
            f"Fitted prefill cost: {self.a * 1e6:.3g} µs·L + {self.b * 1e9:.3g} ns·L² (1,000 tokens:"
            f" {ms(self.prefill_cost(1000))}).",
        ]
        stall = f"its unchunked step is predicted at {ms(self.predicted_stall)}, {self.predicted_ratio:.1f}x a decode"
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
        chunk = self.budget - self.num_chats
        lines.append(
            f"Budget: {self.budget} tokens ({chunk}-token chunks beside the {self.num_chats} decodes), the largest"
            f" power of two (>= block size {self.block_size}, <= the prompt) whose slowest chunked step adds at most"
            f" {self.chunk_cost_steps:g} decode steps of prefill: predicted {ms(self.predicted_chunked_step)}"
            f" ({self.predicted_chunked_step / self.decode_step:.1f}x a decode step)."
            + ("" if self.budget_fits else " Even the smallest budget's chunk costs more than that here.")
        )
        if self.capped_by == "max_model_len":
            lines.append(TOO_SMALL_HINT)
        elif self.capped_by == "kv cache":
            lines.append("A larger KV cache (num_gpu_blocks) would allow a longer prompt.")
        return "\n".join(lines)

    @property
    def budget_fits(self) -> bool:
        """Whether the budget's slowest chunk keeps within ``chunk_cost_steps`` decode steps of prefill."""
        return self.predicted_chunked_step - self.decode_step <= self.chunk_cost_steps * self.decode_step * (1 + 1e-9)


def slowest_chunked_step(decode_step: float, a: float, b: float, tokens: int, chunk: int) -> float:
    """The slowest step of a prompt prefilled ``chunk`` tokens a step beside the decodes."""
    ends = [min(s + max(chunk, 1), tokens) for s in range(0, tokens, max(chunk, 1))]
    return decode_step + max(a * (e - s) + b * (e * e - s * s) for s, e in zip([0, *ends], ends))


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
    """The long prompt: the shortest whole number of blocks whose unchunked step (``decode + a·L + b·L²``) is at
    least ``target_ratio`` decode steps, up to ``max_model_len - long_output_tokens`` and ``kv_room_tokens``
    (the KV cache's tokens left beside the chats). The budget: the largest power of two, at least the block size
    and above ``num_chats``, at most the prompt, whose slowest chunk costs at most ``chunk_cost_steps`` decode
    steps (so the chunked chats still stream at a few decode steps a token)."""
    a, b = fit_prefill_cost(prefill_timings)
    cap = max_model_len - long_output_tokens
    capped_by = "max_model_len"
    if kv_room_tokens is not None and kv_room_tokens < cap:
        cap, capped_by = kv_room_tokens, "kv cache"
    extra = (target_ratio - 1) * decode_step  # the prefill time that makes the step target_ratio decode steps
    root = a + math.sqrt(a * a + 4 * b * extra)  # b·L² + a·L = extra, solved without cancellation for b -> 0
    need = 2 * extra / root if root > 0 else math.inf
    long_tokens = max(block_size, math.ceil(need / block_size) * block_size) if need < math.inf else cap + 1
    if long_tokens <= cap:
        capped_by = None
    long_tokens = min(long_tokens, cap)

    smallest = 1 << max(block_size - 1, num_chats).bit_length()  # a power of two >= block_size, > num_chats
    budget = smallest
    while 2 * budget <= long_tokens:
        step = slowest_chunked_step(decode_step, a, b, long_tokens, 2 * budget - num_chats)
        if step - decode_step > chunk_cost_steps * decode_step:
            break
        budget *= 2
    stall = decode_step + a * long_tokens + b * long_tokens**2
    return StallScene(
        decode_step=decode_step,
        prefill_timings=tuple((int(n), float(t)) for n, t in prefill_timings),
        a=a,
        b=b,
        long_tokens=long_tokens,
        budget=budget,
        predicted_stall=stall,
        predicted_ratio=stall / decode_step,
        predicted_chunked_step=slowest_chunked_step(decode_step, a, b, long_tokens, budget - num_chats),
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
