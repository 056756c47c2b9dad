"""vLLM's Prometheus metrics for one run, in the text exposition format, from an EngineTrace (§11.9).

Mirrors ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``; names and labels as in
vLLM 0.8.5, bucket boundaries as in vLLM 0.9/0.10) and the values that
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

``prometheus_text`` rebuilds these from a whole trace (offline); ``minivllm.serving.metrics.loggers`` keeps the
same ``PrometheusValues`` up to date event by event (a live server). Both print through ``exposition_text``.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from minivllm.metrics.stats import prefix_cache_tokens
from minivllm.metrics.trace import EngineTrace, RequestRecord

# Bucket tables as vLLM's, kept as tables (one value per line would hide their shape).
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

    def histogram(self, name: str, help_text: str, hist: Histogram) -> None:
        self.family(name, "histogram", help_text)
        for bound, count in zip((*hist.bounds, math.inf), itertools.accumulate(hist.counts)):
            self.sample(f"{name}_bucket", count, le=format_value(bound))
        self.sample(f"{name}_sum", hist.total)
        self.sample(f"{name}_count", hist.count)


@dataclass
class Histogram:
    """One histogram as Prometheus keeps it: a count per bucket (the last is +Inf), a sum and a count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # not cumulative; len(bounds) + 1
    total: float = 0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def _bucket(self, x: float) -> None:
        if x == x:  # a NaN falls in no bucket (x <= bound is false), as in prometheus_client
            self.counts[bisect_left(self.bounds, x)] += 1

    def observe(self, x: float) -> None:
        self._bucket(x)
        self.total += x
        self.count += 1

    @classmethod
    def of(cls, bounds: tuple[float, ...], values: Iterable[float]) -> Histogram:
        xs = list(values)
        hist = cls(bounds)
        for x in xs:
            hist._bucket(x)
        hist.total, hist.count = sum(xs), len(xs)
        return hist


REQUEST_HISTOGRAMS = ("e2e", "queue", "inference", "prefill", "decode")  # observed once per finished request
# key, metric name, HELP, buckets: in the order of the page
HISTOGRAMS = (
    ("iteration_tokens", "iteration_tokens_total", "number of tokens per engine_step", ITERATION_TOKENS_BUCKETS),
    ("ttft", "time_to_first_token_seconds", "time to first token in seconds", TTFT_BUCKETS),
    ("tpot", "time_per_output_token_seconds", "time per output token in seconds", TPOT_BUCKETS),
    ("e2e", "e2e_request_latency_seconds", "e2e request latency in seconds", REQUEST_LATENCY_BUCKETS),
    (
        "queue",
        "request_queue_time_seconds",
        "time spent in WAITING phase for request in seconds",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "inference",
        "request_inference_time_seconds",
        "time spent in RUNNING phase for request in seconds",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "prefill",
        "request_prefill_time_seconds",
        "time spent in PREFILL phase for request in seconds",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "decode",
        "request_decode_time_seconds",
        "time spent in DECODE phase for request in seconds",
        REQUEST_LATENCY_BUCKETS,
    ),
)


@dataclass
class PrometheusValues:
    """The counters and histograms of one page (the gauges are passed to ``exposition_text`` live)."""

    num_preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    request_success: dict[str | None, int] = field(default_factory=dict)  # finish reason -> count
    prefix_cache_queries: int = 0  # tokens
    prefix_cache_hits: int = 0
    histograms: dict[str, Histogram] = field(
        default_factory=lambda: {key: Histogram(bounds) for key, _, _, bounds in HISTOGRAMS}
    )


def batch_gaps(token_times: Sequence[float]) -> list[float]:
    """time_per_output_token observations: the gaps between the distinct times tokens came out."""
    times = sorted(set(token_times))
    return [b - a for a, b in zip(times, times[1:])]


def request_latencies(rec: RequestRecord) -> dict[str, float]:
    """The request histograms' observations for one finished request (what vLLM's FinishedRequestStats holds)."""
    if rec.finish_time is None:
        raise ValueError(f"request_latencies needs a finished request: rec.finish_time is None ({rec.request_id!r}).")
    values = {"e2e": rec.finish_time - rec.arrival_time}
    if rec.first_scheduled_time is not None:
        values["queue"] = rec.first_scheduled_time - rec.arrival_time
        if rec.token_times:
            first, last, scheduled = rec.token_times[0], rec.token_times[-1], rec.first_scheduled_time
            values.update(inference=last - scheduled, prefill=first - scheduled, decode=last - first)
    return values


def exposition_text(
    values: PrometheusValues, num_running: int, num_waiting: int, kv_usage: float, model_name: str, engine: int
) -> str:
    """The ``/metrics`` page: the one writer both ``prometheus_text`` and the live stat logger use."""
    out = _Exposition({"model_name": model_name, "engine": str(engine)})
    out.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", num_running)
    out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", num_waiting)
    out.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage (deprecated name).", kv_usage)
    out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage)
    v = values
    out.counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", v.num_preemptions)
    out.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", v.prompt_tokens)
    out.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", v.generation_tokens)
    out.family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    reasons = list(FINISH_REASONS) + sorted(r for r in v.request_success if r is not None and r not in FINISH_REASONS)
    for reason in reasons:
        out.sample("vllm:request_success_total", v.request_success.get(reason, 0), finished_reason=reason)
    for prefix, note in (("vllm:gpu_prefix_cache", " (deprecated name)"), ("vllm:prefix_cache", "")):
        queries, hits = v.prefix_cache_queries, v.prefix_cache_hits
        out.counter(f"{prefix}_queries_total", f"Prefix cache queries, in queried tokens{note}.", queries)
        out.counter(f"{prefix}_hits_total", f"Prefix cache hits, in cached tokens{note}.", hits)
    for key, name, what, _ in HISTOGRAMS:
        out.histogram(f"vllm:{name}", f"Histogram of {what}.", v.histograms[key])
    return "\n".join(out.lines) + "\n"


def trace_values(trace: EngineTrace) -> PrometheusValues:
    """Every counter and histogram rebuilt from a whole trace (offline: cost grows with the trace)."""
    recs = list(trace.requests.values())
    finished = [r for r in recs if r.finish_time is not None]
    queries, hits = prefix_cache_tokens(trace)
    success: dict[str | None, int] = {}
    for r in finished:
        success[r.finish_reason] = success.get(r.finish_reason, 0) + 1
    latencies = [request_latencies(r) for r in finished]
    observed: dict[str, list[float]] = {
        "iteration_tokens": [s.num_scheduled_tokens for s in trace.steps],
        "ttft": [ttft for r in recs if (ttft := r.ttft) is not None],  # None exactly when no token came out
        "tpot": [gap for r in recs for gap in batch_gaps(r.token_times)],
        **{key: [lat[key] for lat in latencies if key in lat] for key in REQUEST_HISTOGRAMS},
    }
    return PrometheusValues(
        num_preemptions=sum(len(s.preempted) for s in trace.steps),
        prompt_tokens=sum(r.num_prompt_tokens for r in recs if r.token_times),
        generation_tokens=sum(r.num_output_tokens for r in recs),
        request_success=success,
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        histograms={key: Histogram.of(bounds, observed[key]) for key, _, _, bounds in HISTOGRAMS},
    )


def prometheus_text(trace: EngineTrace, model_name: str = "smollm2", engine: int = 0) -> str:
    """The run's metrics as a Prometheus ``/metrics`` page would show them after its last step (gauges from it)."""
    last = trace.steps[-1] if trace.steps else None
    running, waiting, usage = (last.num_running, last.num_waiting, last.kv_usage) if last else (0, 0, 0.0)
    return exposition_text(trace_values(trace), running, waiting, usage, model_name, engine)
