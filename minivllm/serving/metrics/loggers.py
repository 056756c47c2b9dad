"""PrometheusStatLogger: the live ``/metrics`` counters and histograms, kept event by event (§11.9).

    logger = PrometheusStatLogger(model_name="smollm2", engine=0)
    engine.trace.observers.append(logger)  # before the first step: it counts what it sees from then on
    s = engine.scheduler; text = logger.render(len(s.running), len(s.waiting), s.kv_cache_manager.usage)

Mirrors ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``: counters and histograms that the engine
feeds once per iteration, never rebuilt) and ``vllm/v1/metrics/stats.py`` (``IterationStats``: prompt tokens
when a request's first token comes out, TTFT, the gaps between output batches; ``FinishedRequestStats``: the
request histograms, aborts included). The metric names, HELP texts, labels, buckets and observation rules are
those of ``minivllm.serving.metrics.prometheus.prometheus_text``, and both print through its ``exposition_text``, so
for a run it watched from the start the page equals ``prometheus_text(trace)`` but for the gauges (and, with
times that are not exact binary fractions, for the last digit of a ``_sum``, added in event order here).

* ``on_step`` costs what the step touched (its scheduled, admitted and sampled requests); ``on_request_finished``
  one request; ``render`` a fixed amount (buckets and finish reasons): none of them reads ``trace.steps``.
* The counters never go back when a server drops its oldest steps and requests (``AsyncEngine`` bounds the
  trace): they live here, not in the trace.
* The gauges are not remembered from the last step (they went stale after aborts between steps): the caller
  passes them live, read from the scheduler.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from minivllm.metrics.trace import EngineTrace, RequestRecord, StepRecord
from minivllm.serving.metrics.prometheus import PrometheusValues, batch_gaps, exposition_text, request_latencies


@dataclass
class PrometheusStatLogger:
    """An ``EngineTrace`` observer (``minivllm.metrics.trace.TraceObserver``) that renders ``/metrics``."""

    model_name: str
    engine: int = 0
    values: PrometheusValues = field(default_factory=PrometheusValues)

    def on_step(self, trace: EngineTrace, record: StepRecord, new_tokens: dict[str, int]) -> None:
        """One engine step: preemptions, scheduled tokens, prefix-cache lookups and the sampled tokens."""
        v, hist = self.values, self.values.histograms
        v.num_preemptions += len(record.preempted)
        hist["iteration_tokens"].observe(record.num_scheduled_tokens)
        for req_id in record.new_requests:  # each admission queries its tokens so far (vLLM's PrefixCacheStats)
            rec = trace.requests[req_id]
            v.prefix_cache_queries += rec.num_prompt_tokens + bisect_left(rec.token_times, record.end)
        v.prefix_cache_hits += sum(record.prefix_cache_hit_tokens.values())
        for req_id, k in new_tokens.items():
            if k > 0:
                self._tokens_out(trace.requests[req_id], k)

    def _tokens_out(self, rec: RequestRecord, k: int) -> None:
        """``k`` tokens were just appended to ``rec.token_times``."""
        v, hist = self.values, self.values.histograms
        v.generation_tokens += k
        if len(rec.token_times) == k:  # its first token: the prompt counts now, as in vLLM
            v.prompt_tokens += rec.num_prompt_tokens
            ttft = rec.ttft
            if ttft is None:
                raise ValueError(f"_tokens_out needs k > 0 tokens already in rec.token_times (got k={k}).")
            hist["ttft"].observe(ttft)
        for gap in batch_gaps(rec.token_times[-k - 1 :]):  # the previous batch's time and this one's
            hist["tpot"].observe(gap)

    def on_request_finished(self, rec: RequestRecord) -> None:
        """A finished request (stop, length or abort): ``request_success`` and the request histograms."""
        v = self.values
        v.request_success[rec.finish_reason] = v.request_success.get(rec.finish_reason, 0) + 1
        for key, x in request_latencies(rec).items():
            v.histograms[key].observe(x)

    def render(self, num_running: int, num_waiting: int, kv_usage: float) -> str:
        """The exposition text now; its cost does not depend on how long the engine has run."""
        return exposition_text(self.values, num_running, num_waiting, kv_usage, self.model_name, self.engine)
