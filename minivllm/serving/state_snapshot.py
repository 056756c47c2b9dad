"""What ``GET /admin/state`` serves, built on the engine thread after every step (§11.1.1 live demo).

The demo page polls the engine's state several times a second. Asking the engine thread for it
(``AsyncEngine.call``) would wait behind the step in progress, so during the very stall the page is
meant to show, the poll would hang for seconds and the page would look frozen. Instead the engine thread
*publishes* a snapshot after each step and after each batch of commands, and the HTTP side reads the
last one without waiting. The snapshot also says when the step in progress began
(``step_started``), so the page can draw the open gap growing while the step runs.

Not in vLLM: its API server reads metrics from the engine core's stats messages (``vllm/v1/metrics``),
never the scheduler's state; this page is minivllm's teaching aid.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from minivllm.engine.llm_engine import LLMEngine

SCHEDULING_FIELDS = ("enable_chunked_prefill", "max_num_batched_tokens", "long_prefill_token_threshold", "max_num_seqs")
MAX_STATE_STEPS = 1000  # steps kept for /admin/state?last_steps=N


def scheduling(engine: LLMEngine) -> dict[str, Any]:
    """The scheduler settings the demo can change, plus max_model_len."""
    return {k: getattr(engine.scheduler.scheduler_config, k) for k in (*SCHEDULING_FIELDS, "max_model_len")}


def step_dict(step: Any) -> dict[str, Any]:
    """One StepRecord as the page reads it (times on the engine's clock)."""
    return {
        "step": step.step,
        "start": step.start,
        "end": step.end,
        "duration": step.duration,
        "prefill_tokens": sum(step.prefill_tokens.values()),
        "decode_tokens": sum(step.decode_tokens.values()),
        "num_running": step.num_running,
        "num_waiting": step.num_waiting,
        "kv_usage": step.kv_usage,
        "preempted": list(step.preempted),
    }


@dataclass
class StateSnapshots:
    """Builds the snapshots; the step dicts are made once per step and kept in a bounded deque, so a
    snapshot costs the same after a million steps as after ten."""

    max_steps: int = MAX_STATE_STEPS
    _steps: deque = field(init=False)
    _num_seen: int = field(default=0, init=False)  # trace.num_steps_recorded when last built

    def __post_init__(self) -> None:
        self._steps = deque(maxlen=self.max_steps)

    def build(self, engine: LLMEngine) -> dict[str, Any]:
        """Call on the engine thread only (it reads the scheduler). The result is never mutated after."""
        trace = engine.trace
        # The steps recorded since the last build, as far as the trace still has them.
        kept = len(trace.steps)
        new = min(trace.num_steps_recorded - self._num_seen, kept)
        self._steps.extend(step_dict(s) for s in trace.steps[kept - new :])
        self._num_seen = trace.num_steps_recorded
        kv = engine.scheduler.kv_cache_manager
        return {
            "published": time.perf_counter(),
            "scheduling": scheduling(engine),
            "num_gpu_blocks": kv.num_gpu_blocks,
            "block_size": kv.block_size,
            "num_free_blocks": kv.block_pool.get_num_free_blocks(),
            "num_running": len(engine.scheduler.running),
            "num_waiting": len(engine.scheduler.waiting),
            "num_unfinished": engine.get_num_unfinished_requests(),
            "num_steps": trace.num_steps_recorded,
            "steps": tuple(self._steps),
        }
