"""Serving metrics from an EngineTrace: TTFT, TPOT, ITL, E2E, throughput, stalls, step series (§11.7, §11.9).

Definitions follow vLLM's ``benchmarks/benchmark_serving.py``
(``calculate_metrics``: TTFT, TPOT, ITL, throughput over completed requests) and its request metrics
(``vllm/v1/metrics/stats.py``: queue time, E2E). Everything is computed from the trace alone:

* TTFT = first token - arrival; TPOT = (last token - first token) / (output tokens - 1), requests
  with > 1 token; ITL = every gap between consecutive tokens of a request, all requests pooled;
  E2E = finish - arrival (completed requests); queue = first scheduled - arrival (scheduled requests).
* Throughput counts completed (not aborted) requests over first arrival -> last finish.
* A generation stall (Sarathi-Serve §1) is a gap above a threshold: ``STALL_FACTOR`` (5) x the run's median
  ITL unless given. This is the one stall definition of the lab (chapters/glossary.md); the Gantt
  (``viz/figures/gantt.py``) applies the same factor to a decode step against the run's median step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from minivllm.metrics.stats import percentile, prefix_cache_tokens
from minivllm.metrics.trace import EngineTrace, RequestRecord

STATS = ("p50", "p95", "p99", "max", "mean")
STALL_FACTOR = 5.0  # a stall: an inter-token gap > 5x the run's median ITL (in a Gantt: a step > 5x the median step)


@dataclass
class Distribution:
    """Summary of a list of durations in seconds (nan when empty)."""

    count: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        xs = list(values)
        if not xs:
            return cls(0, *[math.nan] * 5)
        return cls(len(xs), percentile(xs, 50), percentile(xs, 95), percentile(xs, 99), max(xs), sum(xs) / len(xs))


@dataclass
class Stalls:
    """Inter-token gaps above ``threshold`` seconds."""

    threshold: float
    count: int = 0
    total_time: float = 0.0  # sum of the stalled gaps
    worst_gap: float = 0.0
    per_request: dict[str, list[float]] = field(default_factory=dict)  # the stalled gaps of each request


@dataclass
class StepSeries:
    """One value per step, at the step's end time: what figures plot over time."""

    time: list[float]
    num_running: list[int]
    num_waiting: list[int]
    kv_usage: list[float]
    scheduled_tokens: list[int]
    budget_utilisation: list[float]  # scheduled tokens / token budget (nan without a budget)
    num_preemptions: list[int]
    prefix_hit_tokens: list[int]


def step_series(trace: EngineTrace) -> StepSeries:
    steps = trace.steps
    return StepSeries(
        time=[s.end for s in steps],
        num_running=[s.num_running for s in steps],
        num_waiting=[s.num_waiting for s in steps],
        kv_usage=[s.kv_usage for s in steps],
        scheduled_tokens=[s.num_scheduled_tokens for s in steps],
        budget_utilisation=[s.num_scheduled_tokens / s.token_budget if s.token_budget > 0 else math.nan for s in steps],
        num_preemptions=[len(s.preempted) for s in steps],
        prefix_hit_tokens=[sum(s.prefix_cache_hit_tokens.values()) for s in steps],
    )


def itl_gaps(trace: EngineTrace) -> list[float]:
    return [gap for rec in trace.requests.values() for gap in rec.itls]


def generation_stalls(trace: EngineTrace, threshold: float | None = None) -> Stalls:
    """Gaps above ``threshold`` seconds (default: STALL_FACTOR x the median ITL; no stalls when there is no gap)."""
    if threshold is None:
        median = percentile(itl_gaps(trace), 50)
        threshold = math.inf if math.isnan(median) else STALL_FACTOR * median
    stalls = Stalls(threshold)
    for rec in trace.requests.values():
        gaps = [g for g in rec.itls if g > threshold]
        if gaps:
            stalls.per_request[rec.request_id] = gaps
            stalls.count += len(gaps)
            stalls.total_time += sum(gaps)
            stalls.worst_gap = max(stalls.worst_gap, *gaps)
    return stalls


@dataclass
class MetricsSummary:
    """Everything ``summarize`` computes; ``to_dict()`` is flat, ``table()`` is for the terminal."""

    num_requests: int
    num_completed: int
    num_aborted: int
    num_prompt_tokens: int  # of completed requests
    num_output_tokens: int
    duration: float  # first arrival -> last finish
    request_throughput: float
    output_throughput: float
    total_throughput: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    queue_time: Distribution
    num_steps: int
    num_preemptions: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    mean_budget_utilisation: float
    max_kv_usage: float
    max_num_waiting: int
    stalls: Stalls
    series: StepSeries = field(repr=False)
    num_draft_tokens: int = 0  # §11.8.2: drafts verified ...
    num_accepted_tokens: int = 0  # ... and accepted

    @property
    def spec_acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else math.nan

    @property
    def prefix_cache_hit_rate(self) -> float:
        return self.prefix_cache_hits / self.prefix_cache_queries if self.prefix_cache_queries else math.nan

    def to_dict(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, value in vars(self).items():
            if isinstance(value, Distribution):
                out.update({f"{name}_{stat}": getattr(value, stat) for stat in STATS})
            elif isinstance(value, (int, float)):
                out[name] = value
        out["prefix_cache_hit_rate"] = self.prefix_cache_hit_rate
        out["spec_acceptance_rate"] = self.spec_acceptance_rate
        out.update(num_stalls=self.stalls.count, stall_time=self.stalls.total_time)
        out.update(worst_stall=self.stalls.worst_gap, stall_threshold=self.stalls.threshold)
        return out

    def table(self) -> str:
        """A readable multi-line summary (latencies in ms)."""
        s = self
        lines = [
            f"requests     {s.num_completed} completed, {s.num_aborted} aborted, of {s.num_requests}"
            f" in {s.duration:.3f} s ({s.num_steps} steps)",
            f"throughput   {s.request_throughput:.2f} req/s, {s.output_throughput:.1f} output tok/s,"
            f" {s.total_throughput:.1f} total tok/s",
            f"{'(ms)':<10}" + "".join(f"{stat:>10}" for stat in STATS) + f"{'n':>8}",
        ]
        for label, d in (("TTFT", s.ttft), ("TPOT", s.tpot), ("ITL", s.itl), ("E2E", s.e2e), ("queue", s.queue_time)):
            lines.append(
                f"{label:<10}" + "".join(f"{getattr(d, stat) * 1e3:>10.2f}" for stat in STATS) + f"{d.count:>8}"
            )
        st = s.stalls
        lines += [
            f"stalls       {st.count} gaps > {st.threshold * 1e3:.1f} ms in {len(st.per_request)} requests,"
            f" {st.total_time:.3f} s in all, worst {st.worst_gap * 1e3:.1f} ms",
            f"preemptions  {s.num_preemptions}; prefix cache {s.prefix_cache_hits}/{s.prefix_cache_queries} tokens hit"
            f" ({s.prefix_cache_hit_rate:.1%})",
            f"steps        mean budget use {s.mean_budget_utilisation:.1%}, max KV usage {s.max_kv_usage:.1%},"
            f" max waiting {s.max_num_waiting}",
        ]
        return "\n".join(lines)


def completed_requests(trace: EngineTrace) -> list[RequestRecord]:
    """Requests that finished other than by an abort."""
    return [r for r in trace.requests.values() if r.finish_time is not None and r.finish_reason != "abort"]


def run_duration(trace: EngineTrace) -> float:
    """First arrival to last finish, in seconds (nan before any request has finished)."""
    recs = trace.requests.values()
    finishes = [r.finish_time for r in recs if r.finish_time is not None]
    return max(finishes) - min(r.arrival_time for r in recs) if finishes else math.nan


def summarize(trace: EngineTrace, stall_threshold: float | None = None) -> MetricsSummary:
    """All metrics of one run, from its trace (see the module docstring for the definitions)."""
    recs = list(trace.requests.values())
    done = completed_requests(trace)
    duration = run_duration(trace)
    prompt_tokens = sum(r.num_prompt_tokens for r in done)
    output_tokens = sum(r.num_output_tokens for r in done)
    rate = (lambda x: x / duration) if duration > 0 else (lambda x: math.nan)
    series = step_series(trace)
    budget = [u for u in series.budget_utilisation if not math.isnan(u)]
    queries, hits = prefix_cache_tokens(trace)
    return MetricsSummary(
        num_requests=len(recs),
        num_completed=len(done),
        num_aborted=sum(r.finish_reason == "abort" for r in recs),
        num_prompt_tokens=prompt_tokens,
        num_output_tokens=output_tokens,
        duration=duration,
        request_throughput=rate(len(done)),
        output_throughput=rate(output_tokens),
        total_throughput=rate(prompt_tokens + output_tokens),
        ttft=Distribution.of([ttft for r in recs if (ttft := r.ttft) is not None]),  # None: no token out
        tpot=Distribution.of([r.tpot for r in recs if r.tpot is not None]),
        itl=Distribution.of(itl_gaps(trace)),
        e2e=Distribution.of([r.finish_time - r.arrival_time for r in done if r.finish_time is not None]),  # all
        queue_time=Distribution.of(
            [r.first_scheduled_time - r.arrival_time for r in recs if r.first_scheduled_time is not None]
        ),
        num_steps=len(trace.steps),
        num_preemptions=sum(series.num_preemptions),
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        mean_budget_utilisation=sum(budget) / len(budget) if budget else math.nan,
        max_kv_usage=max(series.kv_usage, default=math.nan),
        max_num_waiting=max(series.num_waiting, default=0),
        stalls=generation_stalls(trace, stall_threshold),
        series=series,
        num_draft_tokens=sum(sum(st.spec_tokens.values()) for st in trace.steps),
        num_accepted_tokens=sum(sum(st.spec_accepted.values()) for st in trace.steps),
    )
