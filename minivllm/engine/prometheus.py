"""vLLM's Prometheus metrics for one run, in the text exposition format, from an EngineTrace (§11.9).

Mirrors ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``; names and labels as in
../reference/vllm_v1_behaviour.md §8, bucket boundaries as in vLLM 0.9/0.10) and the values that
``vllm/v1/metrics/stats.py`` observes, written by hand (no prometheus_client):

* gauges (num_requests_running / waiting, KV usage) come from the last step;
* prompt tokens are counted once per request, when its first token comes out (as vLLM does);
* ``time_per_output_token_seconds`` is observed per output batch after the first (vLLM 0.8.5-0.10),
  i.e. the gaps between the distinct times at which a request received tokens;
* request histograms (E2E, queue, prefill, decode, inference) and ``request_success`` cover every
  finished request, aborts included;
* prefix-cache queries / hits are in tokens under both names (vLLM 0.9+); 0.8.5's ``gpu_*`` counted blocks;
* ``iteration_tokens_total`` observes the tokens scheduled per step (vLLM observes the prompt tokens of
  requests whose prefill finished plus the tokens generated in that step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from minivllm.engine.metrics import prefix_cache_tokens
from minivllm.engine.trace import EngineTrace

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
FINISH_REASONS = ("stop", "length", "abort")  # vLLM's FinishReason values, always exposed


def format_value(x: float) -> str:
    """A sample value or ``le`` bound as Prometheus writes it: +Inf, -Inf, NaN or a Python float repr."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(x)


def escape_label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class _Exposition:
    """Accumulates metric families; every sample carries the base labels (model_name, engine)."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base = base
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines += [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, value: float, **extra: str) -> None:
        labels = ",".join(f'{k}="{escape_label(v)}"' for k, v in {**self.base, **extra}.items())
        self.lines.append(f"{name}{{{labels}}} {format_value(value)}")

    def gauge(self, name: str, help_text: str, value: float) -> None:
        self.family(name, "gauge", help_text)
        self.sample(name, value)

    def counter(self, name: str, help_text: str, value: float) -> None:
        self.family(name, "counter", help_text)
        self.sample(name, value)

    def histogram(self, name: str, help_text: str, buckets: Sequence[float], values: Iterable[float]) -> None:
        xs = list(values)
        self.family(name, "histogram", help_text)
        for bound in (*buckets, math.inf):
            self.sample(f"{name}_bucket", sum(x <= bound for x in xs), le=format_value(bound))
        self.sample(f"{name}_sum", sum(xs))
        self.sample(f"{name}_count", len(xs))


def prometheus_text(trace: EngineTrace, model_name: str = "smollm2", engine: int = 0) -> str:
    """The run's metrics as a Prometheus ``/metrics`` page would show them after its last step."""
    out = _Exposition({"model_name": model_name, "engine": str(engine)})
    last = trace.steps[-1] if trace.steps else None
    recs = list(trace.requests.values())
    finished = [r for r in recs if r.finish_time is not None]
    queries, hits = prefix_cache_tokens(trace)

    out.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", last.num_running if last else 0
    )
    out.gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.", last.num_waiting if last else 0
    )
    usage = last.kv_usage if last else 0.0
    out.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage (deprecated name).", usage)
    out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage)

    preemptions = sum(len(s.preempted) for s in trace.steps)
    out.counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", preemptions)
    prompt_tokens = sum(r.num_prompt_tokens for r in recs if r.token_times)
    out.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", prompt_tokens)
    generation_tokens = sum(r.num_output_tokens for r in recs)
    out.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", generation_tokens)
    out.family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    reasons = list(FINISH_REASONS) + sorted({r.finish_reason for r in finished} - set(FINISH_REASONS) - {None})
    for reason in reasons:
        count = sum(r.finish_reason == reason for r in finished)
        out.sample("vllm:request_success_total", count, finished_reason=reason)
    for prefix, note in (("vllm:gpu_prefix_cache", " (deprecated name)"), ("vllm:prefix_cache", "")):
        out.counter(f"{prefix}_queries_total", f"Prefix cache queries, in queried tokens{note}.", queries)
        out.counter(f"{prefix}_hits_total", f"Prefix cache hits, in cached tokens{note}.", hits)

    out.histogram(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        ITERATION_TOKENS_BUCKETS,
        [s.num_scheduled_tokens for s in trace.steps],
    )
    ttfts = [r.ttft for r in recs if r.token_times]
    out.histogram(
        "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS, ttfts
    )
    batch_gaps = []
    for r in recs:
        times = sorted(set(r.token_times))
        batch_gaps += [b - a for a, b in zip(times, times[1:])]
    out.histogram(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        TPOT_BUCKETS,
        batch_gaps,
    )
    scheduled = [r for r in finished if r.first_scheduled_time is not None]
    with_tokens = [r for r in scheduled if r.token_times]
    request_histograms = (
        ("e2e_request_latency", "e2e request latency", [r.finish_time - r.arrival_time for r in finished]),
        ("request_queue_time", "time spent in WAITING phase for request", [
            r.first_scheduled_time - r.arrival_time for r in scheduled]),
        ("request_inference_time", "time spent in RUNNING phase for request", [
            r.token_times[-1] - r.first_scheduled_time for r in with_tokens]),
        ("request_prefill_time", "time spent in PREFILL phase for request", [
            r.token_times[0] - r.first_scheduled_time for r in with_tokens]),
        ("request_decode_time", "time spent in DECODE phase for request", [
            r.token_times[-1] - r.token_times[0] for r in with_tokens]),
    )  # fmt: skip
    for name, what, values in request_histograms:
        out.histogram(f"vllm:{name}_seconds", f"Histogram of {what} in seconds.", REQUEST_LATENCY_BUCKETS, values)
    return "\n".join(out.lines) + "\n"
