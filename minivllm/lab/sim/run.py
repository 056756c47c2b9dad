"""Replay a timed workload on an engine (:func:`run_workload`); run one for a widget, safely (§11.7).

``run_workload`` is the lab's, not the engine's: vLLM's engine takes requests as they come (the API
server, ``LLM.generate``); replaying arrival times, with an optional intake in front, is the simulator's
(as vLLM's ``benchmarks/benchmark_serving.py`` replays a dataset against a server).

The widgets rerun the real Scheduler on every slider change, so this must be fast
(simulated time: SimRunner with a cost-model preset) and must never hang or raise:
a bad setting returns the config's (or the engine's) own ValueError text, a rejected request
says why, and a run that stops making progress is cut off and explained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.memory import MemoryModel
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.metrics.trace import EngineTrace

DEFAULT_PRESET = "llama2_7b_a100"


def run_workload(
    engine: LLMEngine,
    requests: Iterable[Any],
    max_steps: int | None = None,
    on_step: Callable[[LLMEngine], None] | None = None,
    intake: Callable[[list[float]], list[float]] | None = None,
) -> None:
    """Replay timed requests (objects with request_id, arrival_time, prompt_token_ids, sampling_params and
    optional priority) on ``engine`` until all are done (or ``max_steps``). Arrival times are seconds from
    now; an idle engine waits (wall clock) or jumps (virtual clock) to the next arrival. ``intake`` (an API
    server in front, ``minivllm.lab.sim.intake``) maps the sorted arrival times to the later times the
    engine gets each request; latencies still count from arrival. ``on_step(engine)`` runs after each step.
    A runner in a multi-step burst (``burst_open``, vLLM 0.6's ``--num-scheduler-steps``) gets no new requests
    until the burst ends."""
    clock = engine.clock
    start = clock.now()
    pending = sorted(requests, key=lambda r: r.arrival_time)
    arrivals = [r.arrival_time for r in pending]
    ready = arrivals if intake is None else intake(arrivals)
    i = steps = 0
    while i < len(pending) or engine.has_unfinished_requests():
        if not engine.has_unfinished_requests():
            clock.wait_until(start + ready[i])
        now = clock.now()
        held = getattr(engine.model_runner, "burst_open", False) and engine.has_unfinished_requests()
        while not held and i < len(pending) and start + ready[i] <= now:
            r = pending[i]
            priority = getattr(r, "priority", 0)
            engine.add_request(
                r.request_id,
                r.prompt_token_ids,
                r.sampling_params,
                arrival_time=start + r.arrival_time,
                priority=priority,
            )
            i += 1
        engine.step()
        steps += 1
        if on_step is not None:
            on_step(engine)
        if max_steps is not None and steps >= max_steps:
            break


def demo_workload(num_requests: int = 12, seed: int = 0, vocab_size: int = 32000) -> list[Any]:
    """§11.1's scene, seeded: short chats decoding, then long (RAG-like) prompts land among them."""
    from minivllm.lab.sim.workload import make_workload

    num_chats = max(1, num_requests * 3 // 4)
    w = make_workload(
        "rag_burst",
        num_requests,
        rate=20.0,
        seed=seed,
        vocab_size=vocab_size,
        max_model_len=4096,
        long_prompt_len=(1024, 3000),
        num_chats=num_chats,
        burst_delay=0.2,
    )
    return w.requests


def shared_prefix_workload(num_requests: int = 10, seed: int = 1) -> list[Any]:
    """Requests on two shared 48-token system prompts, prompts + outputs < 256 tokens (§11.5's scenes)."""
    from minivllm.lab.sim.workload import make_workload

    return make_workload(
        "uniform",
        num_requests,
        rate=40.0,
        seed=seed,
        vocab_size=32000,
        max_model_len=256,
        shared_prefix_len=48,
        num_prefix_groups=2,
        prompt_len=(16, 64),
        output_len=(24, 64),
    ).requests


# A simple price list for scenes that need no calibrated model: 5 ms per step + 50 us per token.
TOY_COST_MODEL = CostModel(name="toy_5ms_50us", overhead_s=5e-3, per_token_s=5e-5, vocab_size=32000)


def make_runner(config: EngineConfig, preset: str | None = DEFAULT_PRESET) -> SimRunner:
    """A SimRunner priced by ``preset`` (a cost-model preset name or .json), or by TOY_COST_MODEL when None."""
    cost_model = TOY_COST_MODEL if preset is None else CostModel.from_preset(preset)
    return SimRunner(cost_model, vocab_size=cost_model.vocab_size, config=config)


class _Stop(Exception):
    """Raised from LLMEngine.run's on_step hook to end a run that cannot progress."""


@dataclass
class SimResult:
    engine: LLMEngine | None
    message: str = ""  # empty when the run completed normally

    @property
    def ok(self) -> bool:
        return self.engine is not None and not self.message

    @property
    def trace(self) -> EngineTrace | None:
        return None if self.engine is None else self.engine.trace


def simulate(
    requests: list[Any],
    preset: str | None = DEFAULT_PRESET,
    record_block_pool: bool = False,
    max_steps: int = 20000,
    memory: MemoryModel | None = None,
    **engine_kwargs: Any,
) -> SimResult:
    """Build an engine from vLLM-named ``engine_kwargs``, run ``requests``, never raise for bad input.

    ``memory`` (opt-in, §11.7): size the KV cache as vLLM's profiling run would, from the GPU memory
    minus weights minus the activation peak of a ``max_num_batched_tokens`` batch; it cannot be
    combined with an explicit ``num_gpu_blocks``."""
    engine_kwargs.setdefault("model", "none")
    if memory is not None and engine_kwargs.get("num_gpu_blocks") is not None:
        return SimResult(None, "Invalid setting: give either memory or num_gpu_blocks, not both.")
    try:
        config = EngineConfig.from_kwargs(**engine_kwargs)
        if memory is not None:
            sc, cc = config.scheduler_config, config.cache_config
            assert sc.max_num_batched_tokens is not None and sc.max_num_seqs is not None
            cc.num_gpu_blocks = memory.num_blocks(sc.max_num_batched_tokens, sc.max_num_seqs, cc.block_size)
    except ValueError as e:
        return SimResult(None, f"Invalid setting: {e}")
    try:
        engine = LLMEngine(config, model_runner=make_runner(config, preset), record_block_pool=record_block_pool)
    except ValueError as e:
        return SimResult(None, f"Invalid setting: {e}")

    def check(e: LLMEngine) -> None:
        last = e.trace.steps[-1]
        if last.num_scheduled_tokens == 0 and e.has_unfinished_requests():
            head = e.scheduler.waiting[0] if e.scheduler.waiting else None
            who = f"; the head of the queue is {head.request_id} ({head.num_tokens} tokens)" if head else ""
            raise _Stop(f"Stuck at step {last.step}: no request could be scheduled{who}.")

    try:
        runner = engine.model_runner
        intake = runner.cost_model.intake() if isinstance(runner, SimRunner) else None
        run_workload(engine, requests, max_steps=max_steps, on_step=check, intake=intake)
    except _Stop as stop:
        return SimResult(engine, str(stop))
    except ValueError as e:  # a request the engine rejects (too long for max_model_len, ...)
        return SimResult(engine, f"Request rejected: {e}")
    if engine.has_unfinished_requests():
        return SimResult(engine, f"Stopped after {max_steps} steps with requests still unfinished.")
    return SimResult(engine)
