"""The record of one published vLLM run the simulator replays: settings, workload, metrics, engine (§11.7).

:class:`PublishedRun` writes down a run someone else made on a real GPU (the runs themselves:
:mod:`minivllm.lab.sim.published_runs`): where it is published, the vLLM version and the engine generation it is
priced as (:mod:`minivllm.lab.sim.generation`), model, GPU and tensor parallelism, the scheduler settings the
source states (``None`` = not stated, with a note), the workload, and the published metric values under names that
say the statistic and the unit (``latency_avg_ms``, ``median_e2e_s``, ``mean_ttft_s``, ``median_tpot_ms``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SchedulerSettings:
    """What the source states about the engine's scheduler; None = not stated (see ``notes``)."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    notes: str = ""


@dataclass(frozen=True)
class RunWorkload:
    """The requests: fixed lengths (``prompt_len`` / ``output_len``) or per-request lengths from the source."""

    description: str
    num_requests: int
    request_rate: float | None = None  # requests/s; None = every request at t = 0 (rate inf)
    prompt_len: int | None = None
    output_len: int | None = None
    prompt_lens: tuple[int, ...] = ()
    output_lens: tuple[int, ...] = ()
    stages: tuple[tuple[float, float], ...] = ()  # (requests/s, seconds): evenly spaced arrivals, stage after stage
    shared_prefix_len: int = 0  # the first tokens of each prompt, shared by its group (a system prompt)
    num_prefix_groups: int = 0  # request i belongs to group i % num_prefix_groups
    num_distinct_prompts: int = 0  # > 0: the client cycles this many pre-generated prompts (request i sends prompt
    # i % num_distinct_prompts, so repeats hit the prefix cache in full); 0: every request's prompt is its own

    def arrival_times(self) -> list[float]:
        """Seconds from the start: ``stages`` at constant intervals, else all at t = 0 (Poisson rates are drawn by
        the replay, seeded)."""
        times: list[float] = []
        start = 0.0
        for rate, seconds in self.stages:
            times += [start + k / rate for k in range(round(rate * seconds))]
            start += seconds
        return times

    def lengths(self) -> list[tuple[int, int]]:
        """(prompt, output) per request; a recorded output of 0 tokens becomes 1 (the engine makes at least one)."""
        if self.prompt_lens:
            return [(p, max(1, o)) for p, o in zip(self.prompt_lens, self.output_lens)]
        assert self.prompt_len is not None and self.output_len is not None
        return [(self.prompt_len, self.output_len)] * self.num_requests


@dataclass(frozen=True)
class PublishedRun:
    name: str
    source: str
    vllm_version: str | None
    model: str
    gpu: str
    tensor_parallel_size: int
    settings: SchedulerSettings
    workload: RunWorkload
    metrics: dict[str, float]  # published values: name = statistic + unit (see the module docstring)
    preset: str  # the cost-model preset in minivllm/lab/sim/presets for this model and GPU
    replay: dict[str, Any] = field(default_factory=dict)  # bench flags (config field names) for the simulator
    replay_notes: str = ""
    notes: str = ""
    client: str = "benchmark_latency"  # or "benchmark_serving" / "inference_perf": how the metrics were computed
    recorded_lengths: bool = True  # False: the source publishes no lengths; the replay uses a stated stand-in
    first_token_s: float | None = None  # the run's fastest first token (per-request TTFTs): the intake's cost
    engine_generation: str = "v0.6-multistep"  # the engine the run used, as minivllm.lab.sim.generation names it
    num_scheduler_steps: int = 1  # vLLM 0.6's --num-scheduler-steps on that engine
    generation_notes: str = ""  # why this generation (the version the source states, or the assumption)
    not_comparable: dict[str, str] = field(default_factory=dict)  # metric -> why the replay cannot reproduce it:
    # the row is printed with its ratio, marked "not comparable", and never counted by sim_validation --check


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split())
