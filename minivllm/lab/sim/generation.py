"""Which vLLM engine generation the simulator prices: how a step's host work meets its GPU work (§11.7).

The cost model's ``host`` term (:mod:`minivllm.lab.sim.cost_model`: schedule, prepare inputs, sampler, per-request
bookkeeping) is CPU time. Whether the GPU waits for it depends on the engine, so a preset names its
``engine_generation``:

* ``"v0.6-multistep"`` (the presets' default): vLLM 0.6's V0 ``LLMEngine``, where the host work of a step runs
  before the GPU work it launches, so a step costs ``host + device`` (vLLM 0.6 overlaps only the output
  processing, which the presets leave out of ``host``). Its ``--num-scheduler-steps N`` (multi-step scheduling,
  ``vllm/engine/llm_engine.py`` ``_has_remaining_steps`` + ``vllm/worker/multi_step_model_runner.py``) runs N
  decode steps back to back per scheduler call: the host cost is paid once per burst, and a request that
  arrives mid-burst waits for the burst to end before it is scheduled (why multi-step raises TTFT while it
  lowers TPOT). A step with a prompt in it is a scheduler call of one step (vLLM 0.6 gives prefills no
  lookahead slots: ``Scheduler._get_num_lookahead_slots(is_prefill=True)`` is 0). N = 1 is plain stepping.
  minivllm on a CPU is serial too: the CPU preset uses this generation with N = 1.
* ``"v1"``: vLLM V1's engine core (``vllm/v1/engine/core.py``): the API server's work (tokenise, detokenise,
  stream) runs in another process, and with async scheduling (``async_scheduling``: the scheduler and input
  preparation of step N+1 run while the GPU runs step N) the host work overlaps the device's, so a step costs
  ``max(host, device)``; the ``host`` term reports only the exposed part, ``max(0, host - device)``. Without
  async scheduling V1 still runs its scheduler between steps, but with a persistent batch and CUDA graphs that
  work is a fraction of vLLM 0.6's ~1 ms (the presets' host term is vLLM 0.6's); this generation treats it as
  hidden when the GPU step is longer. V1 has no multi-step scheduling (``num_scheduler_steps`` must be 1).

The optional API-server intake per request (``intake_per_request_s``, :mod:`minivllm.lab.sim.intake`) is
separate from the generation: it delays when the engine sees a request, so it adds to TTFT in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

V06_MULTISTEP = "v0.6-multistep"
V1 = "v1"
GENERATIONS = (V06_MULTISTEP, V1)
DEFAULT_GENERATION = V06_MULTISTEP


def check_generation(engine_generation: str, num_scheduler_steps: int) -> None:
    """A clear ValueError naming the parameter and its allowed values when the pair is invalid."""
    if engine_generation not in GENERATIONS:
        raise ValueError(f"engine_generation must be one of {', '.join(GENERATIONS)}; got {engine_generation!r}.")
    if isinstance(num_scheduler_steps, bool) or not isinstance(num_scheduler_steps, int) or num_scheduler_steps < 1:
        raise ValueError(f"num_scheduler_steps must be an integer >= 1; got {num_scheduler_steps!r}.")
    if engine_generation == V1 and num_scheduler_steps != 1:
        raise ValueError(
            f"num_scheduler_steps must be 1 with engine_generation {V1!r} (V1 has no multi-step scheduling; "
            f"use {V06_MULTISTEP!r} for vLLM 0.6's --num-scheduler-steps); got {num_scheduler_steps}."
        )


def step_seconds(engine_generation: str, host: float, device: float) -> tuple[float, float]:
    """(the step's seconds, the host seconds the GPU waits for) for host work ``host`` and GPU work ``device``."""
    if engine_generation == V1:
        return max(host, device), max(0.0, host - device)
    return host + device, host


def is_prefill_step(shape: Sequence[tuple[int, int]]) -> bool:
    """A step with a prompt (or a chunk of one) in it: some request computes more than one token or starts at
    context 0. Every other step is decode only (one new token per running request)."""
    return any(q != 1 or k == 0 for q, k in shape)


@dataclass
class MultiStepBursts:
    """vLLM 0.6's ``--num-scheduler-steps``: which steps are scheduler calls (paying the host cost), and
    whether a burst is under way (new requests wait for it to end). With N = 1 every step is a call."""

    num_scheduler_steps: int = 1
    left: int = 0  # decode steps still to run in the current burst after the last one
    num_calls: int = 0  # scheduler calls so far (= bursts, counting a prefill step as one)

    @property
    def open(self) -> bool:
        """True while a burst has steps left: requests that arrive now wait for its end."""
        return self.left > 0

    def step(self, shape: Sequence[tuple[int, int]]) -> bool:
        """Record one step of this shape; True when it is a scheduler call (the host cost is paid)."""
        if not shape:
            self.left = 0
            return False
        if self.num_scheduler_steps > 1 and not is_prefill_step(shape) and self.left > 0:
            self.left -= 1
            return False
        self.left = 0 if is_prefill_step(shape) else self.num_scheduler_steps - 1
        self.num_calls += 1
        return True
